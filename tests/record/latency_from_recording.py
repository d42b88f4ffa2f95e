#!/usr/bin/python3
"""latency_from_recording.py DIR [LATENCY_CSV] - the closed loop's latencies
recomputed from an `onigpu run --record DIR` recording alone (numpy's np.load
of its Open Ephys event files), as docs/closed-loop.md defines them: for each
echo (a DigitalInputs change whose pins name a stimulation: pin 0 toggles on
every stimulation, pins 1-7 carry its number mod 128), the echo's
acquisition clock minus the clock of the spike the stimulation answered (the
Stimuli event's sample number). Echoes and stimulations are matched in
order: the next stimulation with that number mod 128.

Prints the count and p50/p99/p99.9/max in us. With LATENCY_CSV (run's
result set, run-*-latency.csv: tag,latency_us,warmup) the recomputed
latencies must equal run's own, echo for echo: exit 1 otherwise."""
import os
import sys

import numpy as np

ACQ_HZ = 250e6


def load(rec, stream):
    """its events, or none when the recording has no such folder (nothing happened)"""
    d = os.path.join(rec, "events", "ONIX-100.%s" % stream, "TTL")
    if not os.path.isdir(d):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
    return (np.load(os.path.join(d, "sample_numbers.npy")), np.load(os.path.join(d, "full_words.npy")))


def groups(sn, words):
    """one (clock, word) per event time: a frame's changed lines share it"""
    out = []
    for s, w in zip(sn.tolist(), words.tolist()):
        if not out or out[-1][0] != s:
            out.append((s, w))
    return out


def main():
    rec = os.path.join(sys.argv[1], "Record Node 101", "experiment1", "recording1")
    ssn, swords = load(rec, "Stimuli")
    if len(ssn) % 8:
        print("latency_from_recording: Stimuli holds %d events, not 8 a stimulation" % len(ssn))
        return 1
    stims = [(int(ssn[i]), int(swords[i])) for i in range(0, len(ssn), 8)]
    echoes = groups(*load(rec, "DigitalInputs"))
    lat, tags, nxt = [], [], 0
    for clk, word in echoes:
        pins = word & 0xFF
        k = pins >> 1
        if (pins & 1) != ((k + 1) & 1):
            continue  # pins no stimulation writes
        n = nxt
        while n < len(stims) and n % 128 != k:
            n += 1
        if n == len(stims):
            continue
        lat.append((clk - stims[n][0]) / ACQ_HZ * 1e6)
        tags.append(n)
        nxt = n + 1
    lat = np.array(lat)
    if len(lat):
        print("latency_from_recording: %d stimulations, %d echoes: p50 %.1f us, p99 %.1f us, p99.9 %.1f us, "
              "max %.1f us" % (len(stims), len(lat), np.percentile(lat, 50), np.percentile(lat, 99),
                               np.percentile(lat, 99.9), lat.max()))
    else:
        print("latency_from_recording: %d stimulations, no echo" % len(stims))
    if len(sys.argv) > 2:
        # run writes no latency table when nothing was echoed (the shell leaves the glob as it is)
        rows = [l.strip().split(",") for l in open(sys.argv[2])][1:] if os.path.exists(sys.argv[2]) else []
        theirs = {int(r[0]): float(r[1]) for r in rows}
        mine = dict(zip(tags, lat.tolist()))
        if set(theirs) != set(mine):
            print("latency_from_recording: run reports %d echoes, the recording %d; first differing tags %s" %
                  (len(theirs), len(mine), sorted(set(theirs) ^ set(mine))[:5]))
            return 1
        worst = max((abs(theirs[t] - mine[t]) for t in mine), default=0.0)
        if worst > 0.01:
            print("latency_from_recording: latencies differ from run's by up to %.3f us" % worst)
            return 1
        print("latency_from_recording: equal to run's own, echo for echo (%d)" % len(mine))
    return 0


sys.exit(main())
