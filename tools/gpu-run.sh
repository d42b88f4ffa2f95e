#!/usr/bin/env bash
# tools/gpu-run.sh - the one script for a GPU machine: build onigpu with CUDA
# for sm_90, run the GPU test label, run every GPU benchmark, and leave logs
# and results under $OUT (default ./out):
#   $OUT/gpu-run.log      everything printed, in order
#   $OUT/ctest-gpu.log    the GPU tests' own output (all of it: which ran, which skipped)
#   $OUT/results.tgz      the benchmark result sets (CSV, JSON, PNG), tar of results/
#   $OUT/summary.txt      the tables the benchmarks printed
# At most a handful of files, so that a device call brings all of them back.
#
# STAGES picks what runs, in this order (default: all of them). Times on the
# lent H100 (16 cores), so that a 600 s device call can be planned:
#   tests        ctest -L gpu and the test_xfer* programs            ~3 min
#   xfer         bench transfer sweep per link preset                 ~14 min
#   xfer-tail    4 KiB x 10^5 per path, both directions, TAIL_REPEAT
#                times (default 1)                                   ~1.5 min each
#   floor        bench floor: 4 KiB host -> GPU copy-and-know
#                mechanisms, 10^5 each, interleaved                  ~1 min
#   loop         bench loop (table 5.2) in memory and through the
#                emulated card, roofline, advise                     ~10 min
#   loop-target  4 KiB / AI 0.75 and 10 over 20000 blocks, every
#                backend, TARGET_REPEAT times (default 1)             ~1 min each
#   run          onigpu run on every backend, advise on its workload ~1 min
#   remote       bench remote --gpu: the emulated card served by onigpu serve on
#                the loopback (UCX's choice and tcp) beside ucx_perftest, 4 KiB
#                blocks into GPU memory (host-staged) against in-process  ~1 min
#   latency      bench latency: spike -> stimulus against block size on
#                LAT_BACKENDS (default cpu,gpu-persistent,gpu-mapped),
#                blocks 1..32, spin 50/1000 us x dma/blocking reads,
#                LAT_SECONDS (default 2) per run, LAT_REPEAT rounds  ~3.5 min a round
#   scale        bench scale: probes SCALE_PROBES (default 1,2,4,8,16) x algorithm x
#                SCALE_BACKENDS (default cpu,gpu-mapped,gpu-persistent), block 16,
#                SCALE_SECONDS (default 3) per run                          ~2 min
#   latency-ab   (only when named) tools/bench-latency-ab.sh: bench latency of
#                this tree against LAT_OLD (a commit, default 6c76ed4: the
#                engine's sleep-polled hand-offs), built from `git archive`
#                like this one (onigpu only), on LAT_AB_BACKENDS (default
#                cpu,gpu-staged,gpu-mapped), blocks LAT_AB_BLOCKS (default
#                1,2,4,8,16), spin 50, blocking reads, LAT_AB_ROUNDS
#                (default 2) rounds                       ~1.5 min build + ~2 min a round
#   mutate       tools/mutate.sh on MUTANTS (default tests/mutants/gpu.txt;
#                MUTATE_ONLY picks ids): do the GPU tests catch each
#                mutation? -> $OUT/mutate-results.tsv   ~0.5 min per mutant
#                (MUTATE_STEP_S: the stage's deadline; cut by it, the file
#                being mutated is restored and the results so far are kept)
# The build (~1.5 min) always runs first, after the Debian packages in .deb/ are
# installed (tools/gpu-debs.sh fetches them here; the call carries .deb). A full run does not fit one 600 s
# call: split it, e.g. STAGES="tests xfer-tail" then STAGES="loop-target run".
#
# Other knobs (environment): BUILD (build dir, default build-gpu), JOBS,
#   XFER_TOTAL (bytes per size, default 256M), XFER_SIZES (default 64:16M), XFER_PATHS (paths of
#   the per-link sweeps, default every path and the DMA agent's),
#   XFER_LINKS (default "gen2x4 unlimited"), TAIL_PATHS (default reference,ring,ring-thp,direct,prepinned,agent),
#   LOOP_SECONDS, ONIGPU_XFER_RANDOM (randomized transfers of test_gpu_xfer, default 10^6).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
RES=$(mktemp -d /tmp/onigpu-results.XXXXXX)/results
mkdir -p "$OUT" "$RES"
# whatever happens, the results come back as one file
trap 'tar czf "$OUT/results.tgz" -C "$(dirname "$RES")" results' EXIT # pack, before it is defined
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
# Debian packages carried in (tools/gpu-debs.sh: the machine has no network), installed first
if ls .deb/*.deb >/dev/null 2>&1; then
    step debs 120 dpkg -i .deb/*.deb >/dev/null
fi
if ! step configure 120 cmake -S . -B "$BUILD" -DONIGPU_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCMAKE_BUILD_TYPE=Release || ! step build 300 cmake --build "$BUILD" -j "$JOBS"; then
    exit 1
fi

STAGES=${STAGES:-tests xfer xfer-tail floor loop loop-target run remote latency scale} # mutate only when named
want() { case " $STAGES " in *" $1 "*) return 0 ;; esac; return 1; }
pack() { tar czf "$OUT/results.tgz" -C "$(dirname "$RES")" results; } # after every stage: a call cut off keeps what ran

if want tests; then
    step gpu-tests 300 ctest --test-dir "$BUILD" -L gpu -V --timeout 240 \
        >"$OUT/ctest-gpu.log" 2>&1
    # the GPU stream's own tests that also run without a GPU, here with one
    step xfer-tests 240 ctest --test-dir "$BUILD" -R '^test_xfer' --output-on-failure --timeout 200 \
        >>"$OUT/ctest-gpu.log" 2>&1
    tail -n 40 "$OUT/ctest-gpu.log"
fi
if want xfer; then
    # --- transfer benchmarks (thesis chapter 4), one result set per link preset ---
    for link in ${XFER_LINKS:-gen2x4 unlimited}; do
        step "bench transfer $link" 300 "$BUILD/onigpu" bench transfer --link "$link" \
            --sizes "${XFER_SIZES:-64:16M}" --total "${XFER_TOTAL:-256M}" --dir both --out "$RES" \
            --paths "${XFER_PATHS:-reference,original,staged,direct,prepinned,chunked,agent}" \
            > >(tee -a "$SUM")
        pack
    done
fi
if want xfer-tail; then
    # the 4 KiB tail: 10^5 transfers per path, max against p50 (TARGETS.md); the
    # ring paths are the reference copy from fresh host addresses, as the card's DMA reads;
    # agent is prepinned with the card's GPU-resident DMA agent (no CUDA call per transfer).
    # Repeated, because on a VM one run's tail says little; and a 16 MiB row for the
    # bandwidth target (>= 85% of the reference's), 256 samples per path (a mean of 64 let
    # a few slow transfers decide it).
    for i in $(seq "${TAIL_REPEAT:-1}"); do
        step "bench transfer 4K x 1e5 ($i)" 180 "$BUILD/onigpu" bench transfer --link unlimited --sizes 4K:4K \
            --paths "${TAIL_PATHS:-reference,ring,ring-thp,direct,prepinned,agent}" --dir both \
            --max-reps 100000 --total 1G --out "$RES" > >(tee -a "$SUM")
        pack
    done
    step "bench transfer 16M" 120 "$BUILD/onigpu" bench transfer --link unlimited --sizes 16M:16M \
        --paths reference,prepinned --dir both --total 4G --out "$RES" > >(tee -a "$SUM")
    pack
fi
if want floor; then
    # the latency floor of each way the host can move 4 KiB into GPU memory and know it landed
    step "bench floor" 300 "$BUILD/onigpu" bench floor --out "$RES" > >(tee -a "$SUM")
    pack
fi
if want loop; then
    # thesis table 5.2 on every backend (round trip per block, stage breakdown)
    step "bench loop" 400 "$BUILD/onigpu" bench loop --seconds "${LOOP_SECONDS:-2}" --out "$RES" \
        > >(tee -a "$SUM")
    pack
    # the same through the emulated card (test core in, test sink out) with the thesis' gen2x4 link
    step "bench loop emu" 300 "$BUILD/onigpu" bench loop --source emu --link gen2x4 \
        --seconds "${LOOP_SECONDS:-2}" --out "$RES" > >(tee -a "$SUM")
    # thesis table 5.1 (ceilings, MAC roofline) and figure 6.1 with these numbers
    step roofline 120 "$BUILD/onigpu" roofline --out "$RES" > >(tee -a "$SUM")
    step advise 120 "$BUILD/onigpu" advise --data 4kB --compute 4kB --ai 0.75 --measure > >(tee -a "$SUM")
    pack
fi
if want loop-target; then
    # the TARGETS.md closed-loop figure (4 KiB / AI 0.75 / 4 KiB, best GPU backend vs gpu-staged in
    # the same run) over 20000 blocks per backend, so that p99.9 is not the second-largest sample
    for i in $(seq "${TARGET_REPEAT:-1}"); do
        step "bench loop 4KiB target ($i)" 120 "$BUILD/onigpu" bench loop --sizes 4KiB/4KiB --ai 0.75,10 \
            --blocks 20000 --seconds 4 --out "$RES" > >(tee -a "$SUM")
        pack
    done
fi
if want run; then
    # the main job on every backend
    for b in cpu gpu-staged gpu-direct gpu-graph gpu-flag gpu-persistent gpu-mapped; do
        step "run $b" 60 "$BUILD/onigpu" run --backend "$b" --seconds 4 --out "$RES/run-$b" > >(tee -a "$SUM")
    done
    # figure 6.1 for the workload the main job recorded
    for f in "$RES"/run-gpu-mapped/run/run-*.json; do
        [ -f "$f" ] && step "advise workload" 120 "$BUILD/onigpu" advise --workload "$f" --measure > >(tee -a "$SUM")
    done
    pack
fi

if want remote; then
    # the remote card (net driver + onigpu serve) against ucx_perftest, and the
    # local server's 4 KiB card -> GPU blocks (staged through host memory)
    step "bench remote" 180 "$BUILD/onigpu" bench remote --gpu --out "$RES" > >(tee -a "$SUM")
    pack
fi

if want latency; then
    # issue 23 items 4-5: where the time after a block's last sample goes, per backend and block,
    # the old waits (spin 50 us, DMA-handed reads) against the new in the same run (ratios table)
    step "bench latency" 580 "$BUILD/onigpu" bench latency --backends "${LAT_BACKENDS:-cpu,gpu-persistent,gpu-mapped}" \
        --blocks 1,2,4,8,16,32 --spins 50,1000 --reads dma,blocking --seconds "${LAT_SECONDS:-2}" \
        --repeat "${LAT_REPEAT:-1}" --out "$RES" > >(tee -a "$SUM")
    pack
fi

if want scale; then
    # issue 24 item 5: probes x algorithm x backend, keeping up and latency, each backend against cpu
    step "bench scale" 580 "$BUILD/onigpu" bench scale --backends "${SCALE_BACKENDS:-cpu,gpu-mapped,gpu-persistent}" \
        --probes "${SCALE_PROBES:-1,2,4,8,16}" --seconds "${SCALE_SECONDS:-3}" --out "$RES" > >(tee -a "$SUM")
    pack
fi

if want latency-ab; then
    # the engine's futex hand-offs against the sleep polls before them (docs/latency.md)
    OLD_SRC=$(mktemp -d /tmp/onigpu-old.XXXXXX)
    if step "archive ${LAT_OLD:-6c76ed4}" 60 bash -c "git archive '${LAT_OLD:-6c76ed4}' | tar -x -C '$OLD_SRC'" &&
        step "configure old" 120 cmake -S "$OLD_SRC" -B "$OLD_SRC/build" -DONIGPU_CUDA=ON \
            -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
        step "build old" 300 cmake --build "$OLD_SRC/build" -j "$JOBS" --target onigpu; then
        step "bench latency-ab" 580 tools/bench-latency-ab.sh --old "$OLD_SRC/build" --old-label "${LAT_OLD:-6c76ed4}" \
            --build "$BUILD" --new-label "${ONIGPU_GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo new)}" \
            --rounds "${LAT_AB_ROUNDS:-2}" --out "$RES" -- --backends "${LAT_AB_BACKENDS:-cpu,gpu-staged,gpu-mapped}" \
            --blocks "${LAT_AB_BLOCKS:-1,2,4,8,16}" --spins 50 --reads blocking --seconds "${LAT_SECONDS:-2}" \
            > >(tee -a "$SUM")
    fi
    rm -rf "$OLD_SRC"
    pack
fi

if want mutate; then
    # fewer randomized transfers per mutant than the tests stage's 10^6
    step mutate "${MUTATE_STEP_S:-590}" env ONIGPU_XFER_RANDOM="${ONIGPU_XFER_RANDOM:-20000}" MUTATE_TIMEOUT=120 \
        tools/mutate.sh "${MUTANTS:-tests/mutants/gpu.txt}" "$BUILD" "$OUT/mutate-results.tsv"
fi

echo "=== done, status $status; results in $OUT"
exit $status
