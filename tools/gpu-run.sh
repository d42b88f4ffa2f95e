#!/usr/bin/env bash
# tools/gpu-run.sh - the one script for a GPU machine: build onigpu with CUDA
# for sm_90, run the GPU test label, run every GPU benchmark, and leave logs
# and results under $OUT (default ./out):
#   $OUT/gpu-run.log      everything printed, in order
#   $OUT/ctest-gpu.log    the GPU tests' own output
#   $OUT/results.tgz      the benchmark result sets (CSV, JSON, PNG), tar of results/
#   $OUT/summary.txt      the tables the benchmarks printed
# At most a handful of files, so that a device call brings all of them back.
#
# Knobs (environment): BUILD (build dir, default build-gpu), JOBS,
#   XFER_TOTAL (bytes per size, default 256M), XFER_SIZES (default 64:16M), XFER_PATHS (paths of
#   the per-link sweeps, default every path and the DMA agent's),
#   XFER_LINKS (default "gen2x4 unlimited"), XFER_DAEMON=0 (transfer benchmarks without the
#   onix-emu daemon's paths), SKIP_TESTS=1, SKIP_BENCH=1, SKIP_LOOP=1 (no loop benchmarks).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
RES=$(mktemp -d /tmp/onigpu-results.XXXXXX)/results
mkdir -p "$OUT" "$RES"
# whatever happens, the results come back as one file
trap 'tar czf "$OUT/results.tgz" -C "$(dirname "$RES")" results' EXIT
LOG=$OUT/gpu-run.log
SUM=$OUT/summary.txt
: >"$SUM"
status=0

step() { # step NAME TIMEOUT_S CMD...: run one step with a deadline, note failures
    local name=$1 limit=$2
    shift 2
    echo "=== $name ($(date -u +%H:%M:%S)): $*"
    timeout "$limit" "$@"
    local rc=$?
    [ $rc -ne 0 ] && { echo "=== $name FAILED rc=$rc"; status=1; }
    return $rc
}

exec > >(tee -a "$LOG") 2>&1
# ONIGPU_GIT_COMMIT names the commit when this tree is a copy whose .git is
# not current (the result sets record it instead of reading .git).
echo "=== onigpu gpu-run $(date -u +%Y-%m-%dT%H:%M:%SZ) commit ${ONIGPU_GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo none)}"
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv
nvcc --version | tail -1
if ! step configure 120 cmake -S . -B "$BUILD" -DONIGPU_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCMAKE_BUILD_TYPE=Release || ! step build 300 cmake --build "$BUILD" -j "$JOBS"; then
    exit 1
fi

if [ "${SKIP_TESTS:-0}" != 1 ]; then
    step gpu-tests 240 ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 200 \
        >"$OUT/ctest-gpu.log" 2>&1
    # the GPU stream's own tests that also run without a GPU, here with one
    step xfer-tests 240 ctest --test-dir "$BUILD" -R '^test_xfer' --output-on-failure --timeout 200 \
        >>"$OUT/ctest-gpu.log" 2>&1
    tail -n 40 "$OUT/ctest-gpu.log"
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
    # --- transfer benchmarks (thesis chapter 4), one result set per link preset ---
    # The card's GPU paths run in this process and again through the onix-emu
    # daemon (CUDA IPC), so that pinning across processes is measured beside.
    DAEMON=()
    if [ "${XFER_DAEMON:-1}" = 1 ]; then
        SOCK=/tmp/onigpu-gpu-run-$$.sock
        "$BUILD/onix-emu" --socket "$SOCK" 2>>"$OUT/gpu-run.log" &
        DPID=$!
        trap 'kill $DPID 2>/dev/null; tar czf "$OUT/results.tgz" -C "$(dirname "$RES")" results' EXIT
        for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
        DAEMON=(--daemon "$SOCK")
    fi
    for link in ${XFER_LINKS:-gen2x4 unlimited}; do
        step "bench transfer $link" 300 "$BUILD/onigpu" bench transfer --link "$link" \
            --sizes "${XFER_SIZES:-64:16M}" --total "${XFER_TOTAL:-256M}" --dir both --out "$RES" \
            --paths "${XFER_PATHS:-reference,original,staged,direct,prepinned,chunked,agent}" \
            > >(tee -a "$SUM")
    done
    # the GPU paths through the daemon beside in-process (an unpinned transfer through the
    # daemon costs ~0.1-0.3 ms: a smaller total keeps this step short)
    if [ ${#DAEMON[@]} -gt 0 ]; then
        step "bench transfer daemon" 240 "$BUILD/onigpu" bench transfer --link unlimited --sizes 4K:16M \
            --total 32M --paths reference,staged,direct,prepinned,chunked --dir both "${DAEMON[@]}" \
            --out "$RES" > >(tee -a "$SUM")
    fi
    # the 4 KiB tail: 10^5 transfers per path, max against p50 (TARGETS.md); the
    # ring paths are the reference copy from fresh host addresses, as the card's DMA reads;
    # agent is prepinned with the card's GPU-resident DMA agent (no CUDA call per transfer)
    step "bench transfer 4K x 1e5" 180 "$BUILD/onigpu" bench transfer --link unlimited --sizes 4K:4K \
        --paths reference,ring,ring-thp,direct,prepinned,agent --dir both --max-reps 100000 --total 1G \
        "${DAEMON[@]}" --out "$RES" > >(tee -a "$SUM")
    [ -n "${DPID:-}" ] && kill "$DPID" 2>/dev/null
fi
if [ "${SKIP_BENCH:-0}" != 1 ] && [ "${SKIP_LOOP:-0}" != 1 ]; then
    # --- closed loop benchmarks ("loop" engineer): add `onigpu bench loop` and
    # --- `onigpu roofline` lines here, writing into "$RES" and appending to "$SUM".
    # thesis table 5.2 on every backend (round trip per block, stage breakdown)
    step "bench loop" 400 "$BUILD/onigpu" bench loop --seconds "${LOOP_SECONDS:-2}" --out "$RES" \
        > >(tee -a "$SUM")
    # the same through the emulated card (test core in, test sink out) with the thesis' gen2x4 link
    step "bench loop emu" 300 "$BUILD/onigpu" bench loop --source emu --link gen2x4 \
        --seconds "${LOOP_SECONDS:-2}" --out "$RES" > >(tee -a "$SUM")
    # the TARGETS.md closed-loop figure (4 KiB / AI 0.75 / 4 KiB, best GPU backend vs gpu-staged in
    # the same run) over 20000 blocks per backend, so that p99.9 is not the second-largest sample
    step "bench loop 4KiB target" 120 "$BUILD/onigpu" bench loop --sizes 4KiB/4KiB --ai 0.75,10 \
        --blocks 20000 --seconds 4 --out "$RES" > >(tee -a "$SUM")
    # thesis table 5.1 (ceilings, MAC roofline) and figure 6.1 with these numbers
    step roofline 120 "$BUILD/onigpu" roofline --out "$RES" > >(tee -a "$SUM")
    step advise 120 "$BUILD/onigpu" advise --data 4kB --compute 4kB --ai 0.75 --measure > >(tee -a "$SUM")
    # the main job on every backend
    for b in cpu gpu-staged gpu-direct gpu-graph gpu-flag gpu-persistent gpu-mapped; do
        step "run $b" 60 "$BUILD/onigpu" run --backend "$b" --seconds 4 --out "$RES/run-$b" > >(tee -a "$SUM")
    done
    # figure 6.1 for the workload the main job recorded
    for f in "$RES"/run-gpu-mapped/run-*.json; do
        [ -f "$f" ] && step "advise workload" 120 "$BUILD/onigpu" advise --workload "$f" --measure > >(tee -a "$SUM")
    done
fi

echo "=== done, status $status; results in $OUT"
exit $status
