#!/usr/bin/env bash
# How the 4 KiB tail evidence of 2026-11-23 (docs/transfers.md, "The 4 KiB tail") was taken, on the
# lent H100, in one device call from the repository root at commit 7948fe6 (the DMA engine waiting on a
# page-locked completion word; "before" = its parent's src/emu/dma.c, cudaStreamQuery polling):
#   1. build both, 2. alternate before/after three times, 10^5 transfers of 4 KiB each way with the
#   reference beside, 3. the phase trace: the "after" build with transfer-20261123-tail-trace.patch
#   applied (timestamps of every synchronous GPU read's steps, dumped by the DMA engine at exit).
# Results: transfer-20261123-tail-{before,after}-{1,2,3}.csv, transfer-20261123-tail-trace.csv;
# read the trace with transfer-20261123-tail-trace.py.
set -u
B=build-gpu
cmake -S . -B $B -DONIGPU_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release && cmake --build $B -j16
mkdir -p /tmp/before && tar cf - --exclude='./build*' --exclude=./.git . | tar xf - -C /tmp/before
git show HEAD~1:src/emu/dma.c > /tmp/before/src/emu/dma.c
(cd /tmp/before && cmake -S . -B b -DONIGPU_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
    cmake --build b -j16 --target onigpu)
R=/tmp/abab; mkdir -p $R
for k in 1 2 3; do
  for v in before after; do
    bin=$B/onigpu; [ $v = before ] && bin=/tmp/before/b/onigpu
    $bin bench transfer --link unlimited --sizes 4K:4K --paths reference,prepinned --dir both \
        --max-reps 100000 --total 1G --out $R/$v-$k
  done
done
git apply docs/results/transfer/transfer-20261123-tail-trace.patch && cmake --build $B -j16 --target onigpu
ONIGPU_DMA_TRACE=$R/trace.csv $B/onigpu bench transfer --link unlimited --sizes 4K:4K --paths prepinned \
    --dir read --max-reps 100000 --total 1G --out $R/tr
git apply -R docs/results/transfer/transfer-20261123-tail-trace.patch
