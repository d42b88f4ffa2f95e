#!/usr/bin/env bash
# bench-upstream.sh - frames/s of upstream liboni against onigpu's liboni, on
# the same machine and the same driver (onigpu's `test` driver), for several
# BLOCKREADSIZE values. Upstream's code is never part of this repository: give
# the path of an upstream liboni checkout (the repository root or its
# api/liboni folder). Not run in CI (it needs that checkout).
#
#   tools/bench-upstream.sh UPSTREAM [--build DIR] [--blocks "1024 4096 ..."]
#                           [--reps N] [--seconds S] [--instr] [--out DIR]
#                           [--upstream-commit SHA]   (recorded when UPSTREAM is not a git checkout)
#                           [--max-payload N]   (only devices of at most N payload bytes: small frames)
#                           [--second-thread]   (a sleeping second thread: no single-thread shortcuts)
# (relative --build and --out paths are the repository's; defaults: build, docs/results)
#
# What it does (docs/benchmarks.md, "Upstream comparison"):
#  1. copies upstream's api/liboni sources to a temporary folder and builds
#     liboni.so.1 there with upstream's own Makefile (its flags: -O3 ...);
#     when that fails or there is no Makefile, with the Makefile's flags
#     minus -Werror, and says so in the JSON;
#  2. builds tools/framerate.c (it includes only oni.h) twice: against
#     upstream's library and against onigpu's (from --build, default
#     `build`: configured there when missing, and always brought up to date
#     with this tree by `cmake --build DIR --target oni onidriver_test`);
#  3. runs both on the test driver: upstream loads libonidriver_test.so from a
#     folder holding only that file (onigpu's liboni.so.1 has the same
#     soname, so it must not be on the search path), onigpu uses the same
#     driver built in. Runs are interleaved (for each repetition, each block
#     size: upstream then onigpu, the order swapped every repetition) so that
#     load on a shared machine hits both alike;
#  4. with --instr, counts instructions per frame with valgrind (the
#     difference of a 1126400- and a 102400-frame run, so setup cancels);
#  5. writes DIR/frames/frames-upstream-<date>.csv and .json (a set's folder
#     is its name up to the first '-', as bench/report.c does): per block size the
#     median, min and max frames/s of each library, the ratio of the medians,
#     and the median, min and max of the ratios of the runs made side by side;
#     all of it twice: frames per wall-clock second, and frames per second of
#     the reading thread's CPU time (steadier on a shared machine: time that
#     other processes take does not count).
# Every run also checks 100000 frames (device, size, per-device counters):
# a library that misparses the stream fails the comparison.
# ONIGPU_GIT_COMMIT (environment) names onigpu's commit when this tree is a
# copy whose .git is not current; the JSON then records it, and null for
# uncommitted_changes_in_library.
set -euo pipefail

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

[[ $# -ge 1 && $1 != -h && $1 != --help ]] || usage
CMDLINE="tools/bench-upstream.sh $*"
UP=$1; shift
BUILD=build BLOCKS="1024 4096 16384 65536 262144 1048576" REPS=5 SECONDS_PER_RUN=1 INSTR=0 OUT=docs/results UP_COMMIT=
MAXPAY= FR_OPT=
while [[ $# -gt 0 ]]; do
    case $1 in # an option that takes a value and has none is a usage error, not set -u's exit 1
    --build|--blocks|--reps|--seconds|--out|--upstream-commit|--max-payload)
        [[ $# -ge 2 ]] || { echo "bench-upstream: $1 needs a value" >&2; usage; } ;;
    esac
    case $1 in
    --build) BUILD=$2; shift 2 ;;
    --blocks) BLOCKS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --seconds) SECONDS_PER_RUN=$2; shift 2 ;;
    --instr) INSTR=1; shift ;;
    --out) OUT=$2; shift 2 ;;
    --upstream-commit) UP_COMMIT=$2; shift 2 ;;
    --max-payload) MAXPAY=$2; shift 2 ;;
    --second-thread) FR_OPT=-t; shift ;;
    -h|--help) usage ;;
    *) echo "bench-upstream: unknown option $1" >&2; usage ;;
    esac
done
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "bench-upstream: --reps must be a positive integer" >&2; exit 2; }
[[ -z $MAXPAY || $MAXPAY =~ ^[1-9][0-9]*$ ]] || { echo "bench-upstream: --max-payload must be a positive whole number of bytes" >&2; exit 2; }

REPO=$(cd "$(dirname "$0")/.." && pwd)
[[ $BUILD == /* ]] || BUILD=$REPO/$BUILD # relative paths are the repository's
[[ $OUT == /* ]] || OUT=$REPO/$OUT
. "$REPO/tools/upstream-lib.sh"
upstream_find "$UP"
CC=${CC:-cc}

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/drv"

# 1. upstream, with its own flags
upstream_build "$TMP/up"
[[ -n $UP_COMMIT ]] || UP_COMMIT=$(git -C "$UP" rev-parse --short HEAD 2>/dev/null || echo unknown)

# 2. onigpu's library and driver, always built from this tree (a no-op when up
# to date): a stale build would be measured and credited to this commit, and a
# stale test driver would give upstream a different driver.
[[ -f $BUILD/CMakeCache.txt ]] || cmake -S "$REPO" -B "$BUILD" >"$TMP/on-build.log" 2>&1 ||
    { cat "$TMP/on-build.log" >&2; echo "bench-upstream: configuring $BUILD failed" >&2; exit 1; }
ON_SRC=$(awk -F= '/^CMAKE_HOME_DIRECTORY:/ {print $2}' "$BUILD/CMakeCache.txt")
[[ $(readlink -f "$ON_SRC") == $(readlink -f "$REPO") ]] ||
    { echo "bench-upstream: $BUILD is a build of $ON_SRC, not of this tree ($REPO)" >&2; exit 2; }
cmake --build "$BUILD" -j "$(nproc)" --target oni onidriver_test >>"$TMP/on-build.log" 2>&1 ||
    { cat "$TMP/on-build.log" >&2; echo "bench-upstream: building onigpu's liboni and test driver failed" >&2; exit 1; }
ON_BUILD="cmake --build ${BUILD#$REPO/} --target oni onidriver_test, run by this script on this tree"
ON_LIB=$BUILD
ON_TYPE=$(awk -F= '/^CMAKE_BUILD_TYPE:/ {print $2}' "$ON_LIB/CMakeCache.txt" 2>/dev/null || true)
ON_TYPE=${ON_TYPE:-RelWithDebInfo (CMakeLists.txt default)}
cp "$ON_LIB/libonidriver_test.so" "$TMP/drv/"
"$CC" -O2 -pthread -I"$TMP/up" "$REPO/tools/framerate.c" "$TMP/up/liboni.so.1" -Wl,-rpath,"$TMP/up" -o "$TMP/fr_upstream"
"$CC" -O2 -pthread -I"$REPO/include" "$REPO/tools/framerate.c" -L"$ON_LIB" -loni -Wl,-rpath,"$ON_LIB" -o "$TMP/fr_onigpu"

# Each program must load the library it was built for (same soname).
resolved() { LD_LIBRARY_PATH=$TMP/drv ldd "$1" | awk '/liboni\.so/ {print ($2 == "=>") ? $3 : $1}'; }
[[ $(resolved "$TMP/fr_upstream") == "$TMP/up/liboni.so.1" ]] || { echo "bench-upstream: fr_upstream does not load upstream's liboni" >&2; exit 1; }
[[ $(readlink -f "$(resolved "$TMP/fr_onigpu")") == $(readlink -f "$ON_LIB/liboni.so.1") ]] || { echo "bench-upstream: fr_onigpu does not load onigpu's liboni" >&2; exit 1; }

run() { # lib block arg: sets RUN_FPS, RUN_CPUFPS; a failed run or a bad frame ends the comparison
    local out
    if ! out=$(LD_LIBRARY_PATH=$TMP/drv "$TMP/fr_$1" $FR_OPT test "$2" "$3" $MAXPAY 2>&1); then
        echo "bench-upstream: $1 at block $2 failed: $out" >&2
        exit 1
    fi
    RUN_FPS=$(awk '{for (i = 1; i <= NF; i++) if ($i ~ /^fps=/) print substr($i, 5)}' <<<"$out")
    RUN_CPUFPS=$(awk '{for (i = 1; i <= NF; i++) if ($i ~ /^cpufps=/) print substr($i, 8)}' <<<"$out")
}

# 3. interleaved runs
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A FPS CPU
for ((r = 1; r <= REPS; r++)); do
    order="upstream onigpu"; ((r % 2)) || order="onigpu upstream"
    for b in $BLOCKS; do
        for lib in $order; do
            run "$lib" "$b" "$SECONDS_PER_RUN"
            FPS[$lib,$b]="${FPS[$lib,$b]:-} $RUN_FPS"
            CPU[$lib,$b]="${CPU[$lib,$b]:-} $RUN_CPUFPS"
            printf 'rep %d block %7d %-8s %12.0f frames/s %12.0f frames/CPU-s\n' "$r" "$b" "$lib" "$RUN_FPS" "$RUN_CPUFPS" >&2
        done
    done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# 4. instructions per frame
declare -A IPF
if ((INSTR)); then
    command -v valgrind >/dev/null || { echo "bench-upstream: --instr needs valgrind" >&2; exit 1; }
    ir() { LD_LIBRARY_PATH=$TMP/drv valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" "$TMP/fr_$1" $FR_OPT test "$2" "$3" $MAXPAY >/dev/null 2>&1; awk '/^summary:/ {print $2}' "$TMP/cg.out"; }
    for b in $BLOCKS; do
        for lib in upstream onigpu; do
            a=$(ir "$lib" "$b" 102400f); z=$(ir "$lib" "$b" 1126400f)
            IPF[$lib,$b]=$(awk -v a="$a" -v z="$z" 'BEGIN {printf "%.1f", (z - a) / 1024000}')
            printf 'block %7d %-8s %s instructions/frame\n' "$b" "$lib" "${IPF[$lib,$b]}" >&2
        done
    done
fi

# 5. results
OUT=$OUT/frames
mkdir -p "$OUT"
STAMP=$(date -u +%Y%m%d-%H%M%S)
CSV=$OUT/frames-upstream-$STAMP.csv JSON=$OUT/frames-upstream-$STAMP.json
stats() { tr ' ' '\n' | awk 'NF' | sort -g | awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.0f %.0f %.0f\n", m, v[1], v[NR]}'; }
ratios() { paste -d' ' <(tr ' ' '\n' <<<"$1" | awk 'NF') <(tr ' ' '\n' <<<"$2" | awk 'NF') | awk '{print $2 / $1}' | sort -g |
           awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f %.3f %.3f\n", m, v[1], v[NR]}'; }
# One measure (FPS or CPU) of one block size as CSV cells and JSON members: $1 = prefix, $2 = array name.
measure() {
    local -n arr=$2
    local u50 umin umax o50 omin omax p50 pmin pmax ratio
    read -r u50 umin umax < <(stats <<<"${arr[upstream,$b]}")
    read -r o50 omin omax < <(stats <<<"${arr[onigpu,$b]}")
    read -r p50 pmin pmax < <(ratios "${arr[upstream,$b]}" "${arr[onigpu,$b]}")
    ratio=$(awk -v u="$u50" -v o="$o50" 'BEGIN {printf "%.3f", o / u}')
    M_CSV="$u50,$umin,$umax,$o50,$omin,$omax,$ratio,$p50,$pmin,$pmax"
    M_JSON="\"upstream_$1_p50\": $u50, \"upstream_$1_min\": $umin, \"upstream_$1_max\": $umax, \"onigpu_$1_p50\": $o50, \"onigpu_$1_min\": $omin, \"onigpu_$1_max\": $omax, \"$1_ratio_of_medians\": $ratio, \"$1_paired_ratio_p50\": $p50, \"$1_paired_ratio_min\": $pmin, \"$1_paired_ratio_max\": $pmax"
    M_TEXT=$(printf 'upstream %11.0f  onigpu %11.0f  onigpu/upstream %s (side by side %s .. %s)' "$u50" "$o50" "$ratio" "$pmin" "$pmax")
}
hdr() { echo "upstream_$1_p50,upstream_$1_min,upstream_$1_max,onigpu_$1_p50,onigpu_$1_min,onigpu_$1_max,$1_ratio_of_medians,$1_paired_ratio_p50,$1_paired_ratio_min,$1_paired_ratio_max"; }
echo "block,$(hdr fps),$(hdr cpufps),upstream_instr_per_frame,onigpu_instr_per_frame,upstream_fps_runs,onigpu_fps_runs,upstream_cpufps_runs,onigpu_cpufps_runs" >"$CSV"
ROWS=()
echo "medians of $REPS runs; frames/s of wall-clock time, then of the reading thread's CPU time:"
for b in $BLOCKS; do
    measure fps FPS
    wall_csv=$M_CSV wall_json=$M_JSON wall_text=$M_TEXT
    measure cpufps CPU
    ui=${IPF[upstream,$b]:-} oi=${IPF[onigpu,$b]:-}
    ufr=$(echo ${FPS[upstream,$b]}) ofr=$(echo ${FPS[onigpu,$b]})
    ucr=$(echo ${CPU[upstream,$b]}) ocr=$(echo ${CPU[onigpu,$b]})
    echo "$b,$wall_csv,$M_CSV,$ui,$oi,${ufr// /;},${ofr// /;},${ucr// /;},${ocr// /;}" >>"$CSV"
    ROWS+=("{\"block\": $b, $wall_json, $M_JSON, \"upstream_instr_per_frame\": ${ui:-null}, \"onigpu_instr_per_frame\": ${oi:-null}, \"upstream_fps_runs\": [${ufr// /, }], \"onigpu_fps_runs\": [${ofr// /, }], \"upstream_cpufps_runs\": [${ucr// /, }], \"onigpu_cpufps_runs\": [${ocr// /, }]}")
    printf 'block %7d wall: %s\n              cpu:  %s\n' "$b" "$wall_text" "$M_TEXT"
done
json_str() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }
{
    echo "{\"meta\": {"
    echo "  \"hostname\": \"$(json_str "$(hostname)")\", \"cpu\": \"$(json_str "$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)")\", \"cores\": $(nproc),"
    echo "  \"kernel\": \"$(json_str "$(uname -sr)")\", \"loadavg_before\": \"$LOAD_BEFORE\", \"loadavg_after\": \"$LOAD_AFTER\","
    echo "  \"command\": \"$(json_str "$CMDLINE")\", \"date\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
    if [[ -n ${ONIGPU_GIT_COMMIT:-} ]]; then # a copy of the tree whose .git is not current
        echo "  \"git_commit\": \"$(json_str "$ONIGPU_GIT_COMMIT")\", \"onigpu_build_type\": \"$ON_TYPE\","
        echo "  \"uncommitted_changes_in_library\": null,"
    else
        echo "  \"git_commit\": \"$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)\", \"onigpu_build_type\": \"$ON_TYPE\","
        echo "  \"uncommitted_changes_in_library\": $([[ -n $(git -C "$REPO" status --porcelain -- src/oni src/drivers src/emu src/gpu include tools/framerate.c 2>/dev/null) ]] && echo true || echo false),"
    fi
    echo "  \"onigpu_build\": \"$(json_str "$ON_BUILD")\", \"onigpu_built_from_current_tree\": true,"
    echo "  \"upstream_commit\": \"$UP_COMMIT\", \"upstream_version\": \"$UP_VERSION\", \"upstream_build\": \"$(json_str "$UP_BUILD")\","
    echo "  \"compiler\": \"$(json_str "$("$CC" --version | head -1)")\", \"driver\": \"test (devices with read_size % 4 != 0${MAXPAY:+ or > $MAXPAY} disabled in both)\","
    echo "  \"second_thread\": $([[ -n $FR_OPT ]] && echo true || echo false),"
    echo "  \"reps\": $REPS, \"seconds_per_run\": $SECONDS_PER_RUN, \"frames_checked_per_run\": 100000"
    echo "},"
    echo "\"results\": ["
    for ((i = 0; i < ${#ROWS[@]}; i++)); do
        printf '  %s%s\n' "${ROWS[$i]}" "$([[ $i -lt $((${#ROWS[@]} - 1)) ]] && echo ,)"
    done
    echo "]}"
} >"$JSON"
echo "wrote ${CSV#$REPO/} and ${JSON#$REPO/}"
