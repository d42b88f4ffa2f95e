#!/usr/bin/env python3
"""Read transfer-20261123-tail-trace.csv (see transfer-20261123-tail-run.sh): per synchronous 4 KiB
GPU read, ns spent in each step of the DMA engine. Rows: every 20th transfer (the sample), every
transfer over 15 us, every transfer after a gap over 1 ms (a refill of the card's FIFO). Columns:
t0 (start, CLOCK_MONOTONIC ns), clk (two back-to-back clock reads: how fast the CPU runs just then),
total, sync (waiting for queued jobs), peek (card lock, FIFO spans), copyq (cudaMemcpyAsync),
wait (until the copy is done), link (link model), consume (card lock, FIFO bookkeeping)."""
import csv, statistics as st, sys
from collections import Counter

path = sys.argv[1] if len(sys.argv) > 1 else "transfer-20261123-tail-trace.csv"
rows = [{k: int(v) for k, v in r.items()} for r in csv.DictReader(open(path)) if r["i"] != "i"]
warm = 200  # the benchmark's untimed warm-up transfers come first
samp = [r for r in rows if r["i"] % 20 == 0 and r["i"] >= warm]
slow = [r for r in rows if r["total"] > 20000 and r["i"] >= warm]
steps = ["sync", "peek", "copyq", "wait", "link", "consume"]
own = lambda r: r["sync"] + r["peek"] + r["link"] + r["consume"]
n = max(r["i"] for r in rows) + 1 - warm
print(f"transfers {n}, sample {len(samp)}, over 20 us {len(slow)} ({100 * len(slow) / n:.2f}%)")
for name, rs in (("sample", samp), ("over 20 us", slow)):
    med = {c: st.median(r[c] for r in rs) for c in steps + ["total", "clk"]}
    print(f"{name:>10}: median ns " + ", ".join(f"{c} {med[c]:.0f}" for c in steps + ["total", "clk"]) +
          f"; card's own steps {st.median(own(r) for r in rs):.0f}; clk > 150 ns in "
          f"{100 * sum(r['clk'] > 150 for r in rs) / len(rs):.1f}%")
print("largest step of the slow ones:", dict(Counter(max(steps, key=lambda c: r[c]) for r in slow)))
idx = sorted(r["i"] for r in slow)
runs, cur = [], [idx[0]]
for a in idx[1:]:
    if a - cur[-1] <= 3:
        cur.append(a)
    else:
        runs.append(cur)
        cur = [a]
runs.append(cur)
print("runs of > 5 slow transfers in a row (first index, length):", [(r[0], len(r)) for r in runs if len(r) > 5])
