#!/usr/bin/env bash
# bench-bias.sh - what the read bias (docs/threads.md) is worth: frames/s of
# tools/framerate.c on the test driver with onigpu's liboni, the bias on and
# off (ONIGPU_READ_BIAS=0), the process with one thread and with a second,
# sleeping one (framerate -t). With one thread, both take the one-thread
# path (docs/threads.md): the two then run the same code. Optionally also
# against another build of onigpu's liboni (--old DIR: a build folder
# holding liboni.so.1), e.g. the tree before a change, shown as "old" or as
# --old-label NAME. Runs are interleaved, so that a shared machine's load
# hits every variant alike.
#
#   tools/bench-bias.sh [--build DIR] [--old DIR [--old-label NAME]] [--blocks "4096 65536"]
#                       [--reps N] [--seconds S] [--out DIR]
#
# Writes DIR/frames/frames-bias-<date>.csv (every run: variant, threads, block,
# frames/s, frames per CPU-second of the reading thread) and prints per
# block and thread count the median frames/CPU-s of each variant and its
# ratio to the bias-on build's. Defaults: build, no --old, 4096 65536, 7
# repetitions of 0.5 s, docs/results.
set -euo pipefail

usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
BUILD=build OLD= OLD_LABEL=old BLOCKS="4096 65536" REPS=7 SECS=0.5 OUT=docs/results
while [[ $# -gt 0 ]]; do
    case $1 in
    --build) BUILD=$2; shift 2 ;;
    --old) OLD=$2; shift 2 ;;
    --old-label) OLD_LABEL=$2; shift 2 ;;
    --blocks) BLOCKS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) usage ;;
    esac
done
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "bench-bias: --reps must be a positive integer" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
abs() { [[ $1 == /* ]] && echo "$1" || echo "$REPO/$1"; }
BUILD=$(abs "$BUILD") OUT=$(abs "$OUT")
[[ -z $OLD ]] || OLD=$(abs "$OLD")
# The library is always built from this tree (a no-op when up to date): a
# stale one would be measured as this tree's.
[[ -f $BUILD/CMakeCache.txt ]] || cmake -S "$REPO" -B "$BUILD" >/dev/null ||
    { echo "bench-bias: configuring $BUILD failed" >&2; exit 1; }
SRC=$(awk -F= '/^CMAKE_HOME_DIRECTORY:/ {print $2}' "$BUILD/CMakeCache.txt")
[[ $(readlink -f "$SRC") == $(readlink -f "$REPO") ]] ||
    { echo "bench-bias: $BUILD is a build of $SRC, not of this tree ($REPO)" >&2; exit 2; }
cmake --build "$BUILD" -j "$(nproc)" --target oni >/dev/null ||
    { echo "bench-bias: building liboni in $BUILD failed" >&2; exit 1; }
[[ -z $OLD || -f $OLD/liboni.so.1 ]] || { echo "bench-bias: $OLD/liboni.so.1 missing" >&2; exit 2; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
CC=${CC:-cc}
"$CC" -O2 -pthread -I"$REPO/include" "$REPO/tools/framerate.c" -L"$BUILD" -loni -Wl,-rpath,"$BUILD" -o "$TMP/fr_new"
VARIANTS="bias nobias"
if [[ -n $OLD ]]; then
    "$CC" -O2 -pthread -I"$REPO/include" "$REPO/tools/framerate.c" -L"$OLD" -loni -Wl,-rpath,"$OLD" -o "$TMP/fr_old"
    VARIANTS="$VARIANTS $OLD_LABEL"
fi

OUT=$OUT/frames # result sets go to <out>/<bench>/, bench = the name up to its first -
mkdir -p "$OUT"
CSV=$OUT/frames-bias-$(date -u +%Y%m%d-%H%M%S).csv
echo "rep,variant,threads,block,fps,cpufps" >"$CSV"
field() { awk -v k="$1" '{for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) print substr($i, length(k) + 2)}'; }
for ((r = 1; r <= REPS; r++)); do
    for b in $BLOCKS; do
        for th in 1 2; do
            opt=; ((th == 1)) || opt=-t
            for v in $VARIANTS; do
                case $v in
                bias) out=$("$TMP/fr_new" $opt test "$b" "$SECS") ;;
                nobias) out=$(ONIGPU_READ_BIAS=0 "$TMP/fr_new" $opt test "$b" "$SECS") ;;
                "$OLD_LABEL") out=$("$TMP/fr_old" $opt test "$b" "$SECS") ;;
                esac
                [[ $(field bad <<<"$out") == 0 ]] || { echo "bench-bias: $v misread frames: $out" >&2; exit 1; }
                echo "$r,$v,$th,$b,$(field fps <<<"$out"),$(field cpufps <<<"$out")" >>"$CSV"
            done
        done
    done
done

echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $REPS runs of $SECS s; $CSV"
echo "median frames per CPU-second (ratio to the bias build):"
for b in $BLOCKS; do
    for th in 1 2; do
        line=$(printf 'block %7d, %d thread(s):' "$b" "$th")
        base=
        for v in $VARIANTS; do
            m=$(awk -F, -v v="$v" -v t="$th" -v b="$b" '$2 == v && $3 == t && $4 == b {print $6}' "$CSV" | sort -g |
                awk '{x[NR] = $1} END {print NR % 2 ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2}')
            [[ -n $base ]] || base=$m
            line="$line $(awk -v v="$v" -v m="$m" -v base="$base" 'BEGIN {printf "  %s %.1f M (%.3f)", v, m / 1e6, m / base}')"
        done
        echo "$line"
    done
done
