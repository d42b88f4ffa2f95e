#!/usr/bin/env bash
# agent-life-ab-20261124.sh - does the DMA agent's bounded lifetime cause its
# slow 4 KiB transfers? Builds onigpu twice on a GPU machine: as committed
# (the agent kernel leaves after AGENT_LIFE_MS = 250 ms and the next
# transfer launches it again) and with AGENT_LIFE_MS = 60000 (no relaunch
# within a row), then runs 4 KiB rows of 10^5 transfers, reference and agent
# paths, both directions, the two builds taking turns. Results under
# $OUT/res-life250 and $OUT/res-life60000 (the outliers CSV of each row
# lists the transfers above 20x their row's p50). Run from the repository root:
#   OUT=/tmp/out ROWS=5 docs/results/agent/agent-life-ab-20261124.sh
set -u
OUT=${OUT:-$PWD/out}
ROWS=${ROWS:-5}
mkdir -p "$OUT"
B=/tmp/agent-life-b
rm -rf "$B" && mkdir -p "$B"
tar --exclude='./build*' --exclude=./.git --exclude=./docs -cf - . | tar xf - -C "$B"
sed -i 's/^#define AGENT_LIFE_MS 250 /#define AGENT_LIFE_MS 60000 /' "$B/src/emu/dma_agent.h"
grep -n "define AGENT_LIFE_MS" src/emu/dma_agent.h "$B/src/emu/dma_agent.h"
for d in . "$B"; do
    cmake -S "$d" -B "$d/build-life" -DONIGPU_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >/dev/null &&
        cmake --build "$d/build-life" -j "$(nproc)" --target onigpu >/dev/null || { echo "build failed in $d"; exit 1; }
done
for i in $(seq "$ROWS"); do
    for v in 250 60000; do
        exe=./build-life/onigpu
        [ "$v" = 60000 ] && exe=$B/build-life/onigpu
        echo "=== row $i, AGENT_LIFE_MS=$v"
        timeout 120 "$exe" bench transfer --link unlimited --sizes 4K:4K --paths reference,agent --dir both \
            --max-reps 100000 --total 1G --out "$OUT/res-life$v" | grep -E "^unlimited .* 4096 " | cut -c1-200
    done
done
