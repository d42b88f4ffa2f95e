#!/usr/bin/env bash
# upstream-programs.sh - builds upstream liboni's own programs, oni-repl and
# onix-loadtest, from an upstream checkout against onigpu's include/ and
# liboni, unchanged and with upstream's compiler flags, and runs them as
# their users do: oni-repl driven on stdin against the test driver (onigpu's
# and upstream's own) and the emulated card (as "emu", and as "riffa", the
# name real software hard-codes, both through onigpu's liboni and through
# upstream's); onix-loadtest (which opens "riffa") against the emulated card;
# then replay_loadtester, the LoadTester round trip of ONIX's latency
# tutorial with its settings (two NP2.0e probes' data, block read size 2048).
# Each run's output is checked. Not run in CI (it needs the checkout).
#
#   tools/upstream-programs.sh UPSTREAM [--build DIR] [--spec SPEC] [--seconds N] [--out FILE]
# (UPSTREAM: an upstream liboni work tree, its api/liboni folder, or a git
# directory such as a mirror, whose HEAD is then used; --build: onigpu's
# build directory, default build; --spec: the emulated card, default
# devices=breakout:loadtest=1,np2e; --seconds: latency measurement time, default 10;
# --out: also write the log there)
#
# Exit 0 when every program built and every check passed, 1 otherwise, 2 for
# a bad invocation.
set -uo pipefail

usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 1 && $1 != -h && $1 != --help ]] || usage
REPO=$(cd "$(dirname "$0")/.." && pwd)
ARG=$1; shift
BUILD=build SPEC=devices=breakout:loadtest=1,np2e SECONDS_LAT=10 OUTFILE=
while [[ $# -gt 0 ]]; do
    [[ $1 == --* && $# -ge 2 ]] || { echo "upstream-programs: $1: an option and its value expected" >&2; usage; }
    case $1 in
    --build) BUILD=$2 ;;
    --spec) SPEC=$2 ;;
    --seconds) SECONDS_LAT=$2 ;;
    --out) OUTFILE=$2 ;;
    *) echo "upstream-programs: unknown option $1" >&2; usage ;;
    esac
    shift 2
done
[[ $SECONDS_LAT =~ ^[1-9][0-9]*$ && $SECONDS_LAT -le 600 ]] ||
    { echo "upstream-programs: --seconds must be an integer from 1 to 600" >&2; exit 2; }
[[ $BUILD == /* ]] || BUILD=$REPO/$BUILD
if [[ -n $OUTFILE ]]; then
    [[ $OUTFILE == /* ]] || OUTFILE=$PWD/$OUTFILE
    [[ -d $(dirname "$OUTFILE") ]] || { echo "upstream-programs: --out: no directory $(dirname "$OUTFILE")" >&2; exit 2; }
fi
CC=${CC:-cc}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# A git directory: take its HEAD (and say which commit).
UP_REV=
if [[ -d $ARG ]] && git -C "$ARG" rev-parse --is-bare-repository 2>/dev/null | grep -q true; then
    UP_REV=$(git -C "$ARG" rev-parse HEAD) || { echo "upstream-programs: $ARG: no HEAD" >&2; exit 2; }
    mkdir -p "$TMP/checkout"
    git -C "$ARG" archive HEAD | tar x -C "$TMP/checkout" || { echo "upstream-programs: $ARG: archive failed" >&2; exit 2; }
    ARG=$TMP/checkout
elif [[ -d $ARG ]]; then
    UP_REV=$(git -C "$ARG" rev-parse HEAD 2>/dev/null || echo "unknown commit")
fi
. "$REPO/tools/upstream-lib.sh"
upstream_find "$ARG"
for f in oni-repl/main.c onix-loadtest/onix-loadtest.c drivers/test/onidriver_test.c; do
    [[ -f $UP/$f ]] || { echo "upstream-programs: $UP/$f missing" >&2; exit 2; }
done

status=0
[[ -z $OUTFILE ]] || : >"$OUTFILE"
log() { printf '%s\n' "$*"; [[ -z $OUTFILE ]] || printf '%s\n' "$*" >>"$OUTFILE"; }
fail() { status=1; log "FAIL: $*"; }
# check NAME FILE REGEX...: every extended regex must match a line of FILE
check() {
    local name=$1 file=$2 re ok=1; shift 2
    for re in "$@"; do
        grep -Eq -- "$re" "$file" || { fail "$name: no line matches /$re/"; ok=0; }
    done
    [[ $ok == 1 ]] && log "ok: $name"
}

# 1. onigpu: liboni, the emu driver, the riffa name pointed at it, the latency replay
[[ -f $BUILD/CMakeCache.txt ]] || cmake -S "$REPO" -B "$BUILD" >"$TMP/cmake.log" 2>&1 ||
    { cat "$TMP/cmake.log" >&2; echo "upstream-programs: configuring $BUILD failed" >&2; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" --target oni onidriver_emu compat_riffa_is_emu replay_loadtester \
    >"$TMP/build.log" 2>&1 || { tail -n 30 "$TMP/build.log" >&2; echo "upstream-programs: building onigpu failed" >&2; exit 1; }
RIFFA=$BUILD/riffa-is-emu
LOADTESTER=$(find "$BUILD" -name replay_loadtester -type f -perm -u+x | head -n 1)

upstream_build "$TMP/up"
log "upstream-programs $(date -u +%Y-%m-%dT%H:%M:%SZ)"
log "  upstream: $UP (commit ${UP_REV:-unknown}), liboni $UP_VERSION, built with $UP_BUILD"
log "  onigpu: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$REPO" diff --quiet 2>/dev/null || echo ' (modified)'), build $BUILD"
log "  host: $(uname -sm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')"
log "  card: ONIGPU_EMU=$SPEC"

# 2. upstream's programs with upstream's flags (oni-repl/Makefile: -pedantic -Wall -W
#    -Werror -fPIC -O3; onix-loadtest has no Makefile: the same), against onigpu's headers
#    onix-loadtest's own source has an extra ';' (#define DEF_BLOCK_READ_SIZE 2048;) that
#    -pedantic -Werror refuses in any library, and a plain `inline` function (error_exit)
#    that C99 never emits out of line: it gets the flags without -Werror, with -fgnu89-inline
UPFLAGS=(-pedantic -Wall -W -Werror -fPIC -O3)
build_prog() { # NAME SRC INCLUDE LIBDIR [FLAG...]
    local name=$1 src=$2 inc=$3 lib=$4; shift 4
    local flags=("${UPFLAGS[@]}"); [[ $# -gt 0 ]] && flags=("$@")
    if "$CC" "${flags[@]}" -I"$inc" "$src" -L"$lib" -Wl,-rpath,"$lib" -lm -lpthread -loni -ldl -o "$TMP/$name" \
        >"$TMP/$name.build" 2>&1; then
        log "ok: built $name ($(basename "$src"), ${flags[*]}) against $inc$( [[ -s $TMP/$name.build ]] &&
            echo ", $(grep -c 'warning:' "$TMP/$name.build") warnings")"
    else
        fail "building $name against $inc: $(head -n 5 "$TMP/$name.build")"
    fi
}
build_prog oni-repl "$UP/oni-repl/main.c" "$REPO/include" "$BUILD"
build_prog onix-loadtest "$UP/onix-loadtest/onix-loadtest.c" "$REPO/include" "$BUILD" -pedantic -Wall -W -fPIC -O3 -fgnu89-inline
# oni-repl against upstream's own liboni too: what software that ships upstream's library runs
ln -sf liboni.so.1 "$TMP/up/liboni.so"
build_prog oni-repl-up "$UP/oni-repl/main.c" "$TMP/up" "$TMP/up"
# upstream's test driver against its headers only, installed as "test"
mkdir -p "$TMP/uptest"
drv_src=("$UP"/drivers/test/*.c)
grep -q '"\.\./\.\./test/testfunc\.h"' "$UP"/drivers/test/*.c && drv_src+=("$UP/test/testfunc.c")
"$CC" -O2 -fPIC -shared -Wall -I"$UP" -I"$UP/drivers/test" "${drv_src[@]}" -o "$TMP/uptest/libonidriver_test.so" \
    -lpthread -lm >"$TMP/uptest.build" 2>&1 || fail "building upstream's test driver: $(head -n 5 "$TMP/uptest.build")"

# 3. oni-repl sessions: commands on stdin, paced as a person types them
repl() { # NAME OUT ENV... -- ARGS...: runs oni-repl (or oni-repl-up with NAME *-up*) with the standard session
    local name=$1 out=$2; shift 2
    local envs=()
    while [[ $1 != -- ]]; do envs+=("$1"); shift; done; shift
    local bin=$TMP/oni-repl; [[ $name == *upstream-liboni* ]] && bin=$TMP/oni-repl-up
    [[ -x $bin ]] || { fail "$name: $(basename "$bin") was not built"; return; }
    { sleep 1; echo t; echo H; echo r; echo "254 2"; sleep 1; echo p; sleep 0.5; echo p; sleep 1; echo q; } |
        env "${envs[@]}" timeout 60 "$bin" "$@" >"$TMP/$out" 2>&1
    local rc=$?
    [[ $rc == 0 ]] || fail "$name: oni-repl exited with $rc: $(tail -n 3 "$TMP/$out" | tr '\n' ' ')"
}
TABLE_ROW='^[0-9]{2} \|[0-9]{5}: 0x[0-9a-f]{2}\.0x[0-9a-f]{2}'
SESSION=('Hardware run state: 1' 'Acquisition Paused' 'Acquisition started' "$TABLE_ROW" 'Dev: [0-9]+ ')

repl "oni-repl, onigpu's test driver" test.out -- test -d -D 100 -n 5
check "oni-repl, onigpu's test driver" "$TMP/test.out" 'Loaded driver: test v1\.' "${SESSION[@]}"
repl "oni-repl, upstream's test driver as \"test\"" uptest.out ONI_DRIVER_PATH="$TMP/uptest" -- test -d -D 100 -n 5
check "oni-repl, upstream's test driver as \"test\"" "$TMP/uptest.out" 'Loaded driver: test v2\.1\.0' "${SESSION[@]}"
repl "oni-repl, emulated card" emu.out ONIGPU_EMU="$SPEC" -- emu -d -D 100 -n 5
check "oni-repl, emulated card" "$TMP/emu.out" 'Loaded driver: emu' "${SESSION[@]}" 'Hub hardware ID: 1, ' \
    'Hub firmware version: 2\.' 'Reg\. value: [0-9]+'
repl "oni-repl, emulated card as \"riffa\" (ONI_DRIVER_PATH)" riffa.out ONI_DRIVER_PATH="$RIFFA" ONIGPU_EMU="$SPEC" -- \
    riffa -d -D 100 -n 5
check "oni-repl, emulated card as \"riffa\" (ONI_DRIVER_PATH)" "$TMP/riffa.out" 'Loaded driver: emu' "${SESSION[@]}" \
    'Hub firmware version: 2\.'
repl "oni-repl on upstream-liboni, emulated card as \"riffa\" (LD_LIBRARY_PATH)" riffa-up.out \
    LD_LIBRARY_PATH="$RIFFA" ONIGPU_EMU="$SPEC" -- riffa -d -D 100 -n 5
check "oni-repl on upstream-liboni, emulated card as \"riffa\" (LD_LIBRARY_PATH)" "$TMP/riffa-up.out" \
    'Loaded driver: emu' "${SESSION[@]}" 'Hub firmware version: 2\.'
for f in test uptest emu riffa riffa-up; do
    [[ -f $TMP/$f.out ]] || continue
    log "--- oni-repl session ($f), device table and hub:"
    log "$(grep -E "$TABLE_ROW|^Hub |^Loaded driver|Error" "$TMP/$f.out" | head -n 40)"
done

# 4. onix-loadtest (opens "riffa"): block read size 2048, 392-word frames (one
#    NP2.0e frame's size, tune-readsize.md), 2 s per step, from 60 kHz (two probes)
if [[ -x $TMP/onix-loadtest ]]; then
    ONI_DRIVER_PATH=$RIFFA ONIGPU_EMU=$SPEC timeout 600 "$TMP/onix-loadtest" 2048 392 2 0 60000 \
        >"$TMP/loadtest.out" 2>&1
    rc=$?
    [[ $rc == 0 ]] || fail "onix-loadtest exited with $rc: $(tail -n 3 "$TMP/loadtest.out" | tr '\n' ' ')"
    check "onix-loadtest, emulated card as \"riffa\"" "$TMP/loadtest.out" '^Load tester internal clock: [0-9]+' \
        '^60000 Hz .*: OK' '^Last good value: [0-9]+ Hz'
    good=$(sed -n 's/^Last good value: \([0-9]*\) Hz.*/\1/p' "$TMP/loadtest.out")
    [[ -n $good && $good -ge 60000 ]] || fail "onix-loadtest: last good rate ${good:-none} below 60000 Hz (two NP2.0e probes)"
    log "--- onix-loadtest 2048 392 2 0 60000:"
    log "$(grep -vE '^(Bandwdith|	 )' "$TMP/loadtest.out")"
fi

# 5. the round trip of the latency tutorial, on the emulated card's LoadTester
if [[ -n $LOADTESTER ]]; then
    ONI_DRIVER_PATH=$RIFFA ONIGPU_EMU=$SPEC timeout 700 "$LOADTESTER" "$SECONDS_LAT" 2048 >"$TMP/lat.out" 2>&1 ||
        fail "replay_loadtester: $(grep -E 'FAIL' "$TMP/lat.out" | head -n 3 | tr '\n' ' ')"
    check "replay_loadtester (tune-readsize.md settings)" "$TMP/lat.out" 'round trip .* mean [0-9.]+ us'
    log "--- replay_loadtester $SECONDS_LAT 2048:"
    log "$(cat "$TMP/lat.out")"
else
    fail "replay_loadtester was not built"
fi

log "upstream-programs: $([[ $status == 0 ]] && echo "all checks passed" || echo FAILED)"
exit $status
