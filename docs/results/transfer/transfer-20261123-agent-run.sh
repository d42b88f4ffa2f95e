#!/usr/bin/env bash
# The one device call of 2026-11-23 for the DMA agent (docs/transfers.md, DMA agent):
# build, the agent's GPU tests, the 4 KiB tail (10^5, unlimited link) and a short
# size sweep of reference / prepinned / agent in one process each, then the rest of
# the GPU tests and the test_xfer* tests. Every step has a deadline inside LIMIT
# seconds in all. Output: $OUT/run.log, $OUT/ctest-agent.log, $OUT/ctest.log,
# $OUT/results.tgz (the result sets). Run from the repository root.
set -u
OUT=${OUT:-$PWD/out}
B=${BUILD:-build-gpu}
LIMIT=${LIMIT:-285}
R=$(mktemp -d /tmp/agent-res.XXXXXX)/results
mkdir -p "$OUT" "$R"
trap 'tar czf "$OUT/results.tgz" -C "$(dirname "$R")" results' EXIT
exec > >(tee "$OUT/run.log") 2>&1
T0=$(date +%s)
left() { # left S: S, or what is left of LIMIT if less (at least 5)
    local r=$((LIMIT - ($(date +%s) - T0)))
    [ "$r" -lt 5 ] && r=5
    [ "$r" -lt "$1" ] && echo "$r" || echo "$1"
}
echo "=== agent run $(date -u +%Y-%m-%dT%H:%M:%SZ) commit ${ONIGPU_GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader
nvcc --version | tail -1
grep '^cpu ' /proc/stat
timeout "$(left 100)" cmake -S . -B "$B" -DONIGPU_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release >/dev/null || { echo "=== configure failed"; exit 1; }
timeout "$(left 170)" cmake --build "$B" -j "$(nproc)" >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "=== build failed"; exit 1; }
echo "=== built ($(($(date +%s) - T0)) s)"
timeout "$(left 60)" "$B/tests/test_gpu_agent" >"$OUT/ctest-agent.log" 2>&1
echo "=== test_gpu_agent rc=$? ($(($(date +%s) - T0)) s)"
tail -n 25 "$OUT/ctest-agent.log"
timeout "$(left 60)" "$B/onigpu" bench transfer --link unlimited --sizes 4K:4K --paths reference,prepinned,agent \
    --dir both --max-reps 100000 --total 1G --out "$R"
echo "=== tail rc=$? ($(($(date +%s) - T0)) s)"
timeout "$(left 90)" "$B/onigpu" bench transfer --link unlimited --sizes 64:16M --total 16M \
    --paths reference,prepinned,agent --dir both --out "$R"
echo "=== sweep rc=$? ($(($(date +%s) - T0)) s)"
grep '^cpu ' /proc/stat
ONIGPU_XFER_RANDOM=200000 timeout "$(left 100)" ctest --test-dir "$B" -L gpu -E agent --output-on-failure \
    --timeout 95 -j2 >"$OUT/ctest.log" 2>&1
echo "=== ctest gpu rc=$? ($(($(date +%s) - T0)) s)"
timeout "$(left 40)" ctest --test-dir "$B" -R '^test_xfer' --output-on-failure --timeout 35 -j4 >>"$OUT/ctest.log" 2>&1
echo "=== ctest xfer rc=$? ($(($(date +%s) - T0)) s)"
grep -E "Test +#|tests passed|FAILED|Failed" "$OUT/ctest.log"
