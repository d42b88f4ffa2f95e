#!/usr/bin/env bash
# compat-upstream.sh - does a driver built against upstream's headers load and
# behave the same in onigpu's liboni as in upstream's? Upstream's own `test`
# driver is the driver: built from an upstream liboni checkout (never part of
# this repository) against that checkout's headers only, renamed
# libonidriver_uptest.so so that onigpu's built-in `test` does not shadow it.
# Not run in CI (it needs that checkout).
#
#   tools/compat-upstream.sh UPSTREAM [--build DIR] [--frames N] [--out FILE]
# (UPSTREAM: the repository root or its api/liboni folder; --build: onigpu's
# build directory, default build, relative paths the repository's; --frames:
# default 1000000; --out: also write the report there)
#
# Then tools/hostcheck.c, built once against each library, runs on that
# driver in each (blocks of 4096 bytes, and the library's default), and the
# two outputs must be the same line for line: device table, registers,
# refusals, frames per device, stop, reset and destroy. Exit 0 when they are,
# 1 when they differ or a run fails, 2 for a bad invocation.
set -euo pipefail

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 1 && $1 != -h && $1 != --help ]] || usage
REPO=$(cd "$(dirname "$0")/.." && pwd)
ARG=$1; shift
BUILD=build FRAMES=1000000 OUTFILE=
while [[ $# -gt 0 ]]; do
    [[ $1 == --* && $# -ge 2 ]] || { echo "compat-upstream: $1: an option and its value expected" >&2; usage; }
    case $1 in
    --build) BUILD=$2; shift 2 ;;
    --frames) FRAMES=$2; shift 2 ;;
    --out) OUTFILE=$2; shift 2 ;;
    *) echo "compat-upstream: unknown option $1" >&2; usage ;;
    esac
done
[[ $FRAMES =~ ^[1-9][0-9]*$ ]] || { echo "compat-upstream: --frames must be a positive integer" >&2; exit 2; }
[[ $BUILD == /* ]] || BUILD=$REPO/$BUILD
. "$REPO/tools/upstream-lib.sh"
upstream_find "$ARG"
[[ -d $UP/drivers/test ]] || { echo "compat-upstream: $UP/drivers/test missing: this checkout has no test driver" >&2; exit 2; }
CC=${CC:-cc}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/drv"

# 1. upstream's library, and its test driver against its headers alone
upstream_build "$TMP/up"
drv_src=("$UP"/drivers/test/*.c)
# some versions take helpers from upstream's test folder (#include "../../test/testfunc.h")
grep -q '"\.\./\.\./test/testfunc\.h"' "$UP"/drivers/test/*.c && drv_src+=("$UP/test/testfunc.c")
"$CC" -O2 -fPIC -shared -Wall -I"$UP" -I"$UP/drivers/test" "${drv_src[@]}" -o "$TMP/drv/libonidriver_uptest.so" -lpthread -lm

# 2. onigpu's library, from this tree; hostcheck against each
[[ -f $BUILD/CMakeCache.txt ]] || cmake -S "$REPO" -B "$BUILD" >"$TMP/on-build.log" 2>&1 ||
    { cat "$TMP/on-build.log" >&2; echo "compat-upstream: configuring $BUILD failed" >&2; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" --target oni >>"$TMP/on-build.log" 2>&1 ||
    { cat "$TMP/on-build.log" >&2; echo "compat-upstream: building onigpu's liboni failed" >&2; exit 1; }
"$CC" -O2 -I"$TMP/up" "$REPO/tools/hostcheck.c" "$TMP/up/liboni.so.1" -Wl,-rpath,"$TMP/up" -o "$TMP/hc_upstream"
"$CC" -O2 -I"$REPO/include" "$REPO/tools/hostcheck.c" -L"$BUILD" -loni -Wl,-rpath,"$BUILD" -o "$TMP/hc_onigpu"

# 3. the same runs in both; upstream finds drivers on the library path,
# onigpu in ONI_DRIVER_PATH too: both are given the folder both ways
status=0
report() { echo "$@"; [[ -z $OUTFILE ]] || echo "$@" >>"$OUTFILE"; }
[[ -z $OUTFILE ]] || : >"$OUTFILE"
report "compat-upstream $(date -u +%Y-%m-%dT%H:%M:%SZ): upstream $UP_VERSION ($UP_BUILD), its drivers/test as uptest;" \
       "onigpu $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?') ($BUILD); $(uname -m), $(nproc) cores"
for block in 4096 ""; do
    for lib in upstream onigpu; do
        if ! LD_LIBRARY_PATH=$TMP/drv ONI_DRIVER_PATH=$TMP/drv "$TMP/hc_$lib" uptest "$FRAMES" $block \
            >"$TMP/$lib.out" 2>"$TMP/$lib.err"; then
            status=1
            report "hostcheck with $lib's liboni failed: $(tail -n 3 "$TMP/$lib.err" "$TMP/$lib.out")"
        fi
    done
    report "--- hostcheck uptest $FRAMES ${block:-(default block)}: $(cat "$TMP/upstream.err") / $(cat "$TMP/onigpu.err")"
    if diff "$TMP/upstream.out" "$TMP/onigpu.out" >"$TMP/diff"; then
        report "the same, $(wc -l <"$TMP/onigpu.out") lines:"
        report "$(cat "$TMP/onigpu.out")"
    else
        status=1
        report "they differ (< upstream, > onigpu):"
        report "$(cat "$TMP/diff")"
    fi
done
report "compat-upstream: $([[ $status == 0 ]] && echo "the same in both libraries" || echo FAILED)"
exit $status
