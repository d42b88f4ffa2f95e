#!/usr/bin/python3
"""check_openephys.py [--prefix] DIR REF TRUTH [SPIKES]
check_openephys.py --self DIR MIN_SAMPLES - read an Open Ephys binary
recording that onigpu wrote, as an analysis tool would (numpy's np.load and
np.memmap, following the format's documentation: Open Ephys GUI docs,
"Binary format"), and compare it with what the card produced.

REF holds every frame the test read from the card, in read-frame form
([u64 time][u32 dev_idx][u32 data_sz][payload padded to 4 bytes]). The
NP2.0e super-frames are decoded here from docs/devices.md's statement of
the layout (ADC k of sub-frame i at data word 4 + 36 i + 4 (k // 3) + k % 3
after the probe index, channel 128 (k % 3) + 32 ((k // 3) // 2) + (k // 3) % 2
+ 2 i; 12-bit offset binary around 2048), not with onigpu's code.
TRUTH is the card's ground truth (dev_idx,unit,channel,sample_time,snr).
With --self (no reference: a recording `onigpu read --record` made) every
stream must be whole: its files agree, its sample numbers count from 0, its
clock steps by one sample period (none missing), at least MIN_SAMPLES
samples in the NP2.0e probe A stream.
With --prefix the recording may hold fewer samples and events than REF (a
recording cut short: killed, a full disk): what it holds must be REF's
first ones, and every file of a folder must agree.
Exit 0 when everything matches; 1 with the first difference printed.
Uses only numpy and the standard library."""
import json
import os
import sys

import numpy as np

ACQ_HZ = 250e6
RAW_DEV = 8
DIO_DEV = 7


def fail(msg):
    print("check_openephys: " + msg)
    sys.exit(1)


def frames(ref):
    """(time, dev, payload bytes) of every frame of REF."""
    b = open(ref, "rb").read()
    off, out = 0, []
    while off + 16 <= len(b):
        t, dev, sz = np.frombuffer(b, dtype="<u8", count=1, offset=off)[0], *np.frombuffer(
            b, dtype="<u4", count=2, offset=off + 8)
        out.append((int(t), int(dev), b[off + 16:off + 16 + int(sz)]))
        off += 16 + ((int(sz) + 3) & ~3)
    if off != len(b):
        fail("REF is not whole frames")
    return out


def np2e_table():
    """word index (within the u16 words after the probe index) -> channel, from docs/devices.md."""
    word, chan = [], []
    for i in range(16):
        for k in range(24):
            word.append(4 + 36 * i + 4 * (k // 3) + k % 3)
            chan.append(128 * (k % 3) + 32 * ((k // 3) // 2) + (k // 3) % 2 + 2 * i)
    if sorted(chan) != list(range(384)):
        fail("the documented channel map does not cover 384 channels")
    return np.array(word), np.array(chan)


def decode_np2e(fr, probe):
    word, chan = np2e_table()
    rows, clocks = [], []
    for t, dev, p in fr:
        if dev != RAW_DEV:
            continue
        w = np.frombuffer(p, dtype="<u2")
        if w[4] != probe:
            continue
        data = w[5:]
        row = np.zeros(384, dtype=np.int16)
        row[chan] = data[word].astype(np.int32) - 2048
        rows.append(row)
        clocks.append(int(np.frombuffer(p, dtype="<u8", count=1)[0]))
    return np.array(rows, dtype=np.int16).reshape(-1, 384), np.array(clocks, dtype=np.uint64)


def self_check(top, least):
    rec = os.path.join(top, "Record Node 101", "experiment1", "recording1")
    info = json.load(open(os.path.join(rec, "structure.oebin")))
    probe = 0
    for c in info["continuous"]:
        d = os.path.join(rec, "continuous", c["folder_name"])
        dat = np.memmap(os.path.join(d, "continuous.dat"), mode="r", dtype="int16")
        if len(dat) % c["num_channels"]:
            fail(c["stream_name"] + ": continuous.dat holds a part of a row")
        n = len(dat) // c["num_channels"]
        sn = np.load(os.path.join(d, "sample_numbers.npy"), mmap_mode="r")
        ts = np.load(os.path.join(d, "timestamps.npy"), mmap_mode="r")
        host = np.load(os.path.join(d, "host_ns.npy"), mmap_mode="r")
        if not (len(sn) == len(ts) == len(host) == n):
            fail("%s: %d rows, %d sample numbers, %d timestamps, %d host times" %
                 (c["stream_name"], n, len(sn), len(ts), len(host)))
        if not np.array_equal(sn, np.arange(n)):
            fail(c["stream_name"] + ": sample numbers are not 0..n-1")
        period = ACQ_HZ / c["sample_rate"]
        step = np.diff(np.rint(np.asarray(ts) * ACQ_HZ))
        if n > 1 and (step.min() < np.floor(period) or step.max() > np.ceil(period)):
            fail("%s: clock steps %d..%d, one sample is %.2f" % (c["stream_name"], step.min(), step.max(), period))
        if c["stream_name"] == "PortA-ProbeA":
            probe = n
        print("check_openephys: %s: %d samples, whole" % (c["stream_name"], n))
    if probe < least:
        fail("PortA-ProbeA: %d samples, fewer than %d" % (probe, least))
    print("check_openephys: ok")


def main():
    args = sys.argv[1:]
    if args[:1] == ["--self"] and len(args) == 3:
        return self_check(args[1], int(args[2]))
    prefix = args[:1] == ["--prefix"]
    if prefix:
        args = args[1:]
    if len(args) < 3:
        fail("usage: check_openephys.py [--prefix] DIR REF TRUTH [SPIKES]")
    top, ref, truth = args[:3]
    rec = os.path.join(top, "Record Node 101", "experiment1", "recording1")
    info = json.load(open(os.path.join(rec, "structure.oebin")))
    if not info["GUI version"].startswith("0.6"):
        fail("GUI version " + info["GUI version"])
    streams = {c["stream_name"]: c for c in info["continuous"]}
    if "PortA-ProbeA" not in streams:
        fail("no PortA-ProbeA stream: " + ", ".join(streams))
    c = streams["PortA-ProbeA"]
    if c["num_channels"] != 384 or len(c["channels"]) != 384 or c["sample_rate"] != 30000:
        fail("stream header: %d channels, %s Hz" % (c["num_channels"], c["sample_rate"]))
    for i, ch in enumerate(c["channels"]):
        if ch["channel_name"] != "CH%d" % (i + 1) or abs(ch["bit_volts"] - 0.195) > 1e-9 or ch["units"] != "uV":
            fail("channel %d: %s" % (i, ch))
    d = os.path.join(rec, "continuous", c["folder_name"])
    dat = np.memmap(os.path.join(d, "continuous.dat"), mode="r", dtype="int16")
    samples = dat.reshape(len(dat) // 384, 384)
    sn = np.load(os.path.join(d, "sample_numbers.npy"), mmap_mode="r")
    ts = np.load(os.path.join(d, "timestamps.npy"), mmap_mode="r")
    host = np.load(os.path.join(d, "host_ns.npy"))
    if sn.dtype != np.int64 or ts.dtype != np.float64 or host.dtype != np.int64:
        fail("dtypes %s %s %s" % (sn.dtype, ts.dtype, host.dtype))

    fr = frames(ref)
    want, clocks = decode_np2e(fr, 0)
    if prefix:
        want, clocks = want[:samples.shape[0]], clocks[:samples.shape[0]]
    n = want.shape[0]
    print("check_openephys: %d samples in the recording, %d probe A super-frames read from the card" %
          (samples.shape[0], n))
    if samples.shape[0] != n or len(sn) != n or len(ts) != n or len(host) != n:
        fail("rows: data %d, sample_numbers %d, timestamps %d, host_ns %d; the card sent %d" %
             (samples.shape[0], len(sn), len(ts), len(host), n))
    if n < (300 if prefix else 1000):
        fail("too few samples to mean anything")
    if not np.array_equal(samples, want):
        r, ch = np.argwhere(samples != want)[0]
        fail("sample %d channel %d: recorded %d, the card sent %d" % (r, ch, samples[r, ch], want[r, ch]))
    if not np.array_equal(sn, np.arange(n)):
        fail("sample_numbers are not 0..n-1")
    if not np.array_equal(np.rint(ts * ACQ_HZ).astype(np.uint64), clocks):
        fail("timestamps are not the super-frames' hub clocks / 250 MHz")
    # the card's own counter: one super-frame per 1/30000 s of its clock, none missing
    step = np.diff(clocks.astype(np.int64))
    if step.min() < 8333 or step.max() > 8334:
        fail("hub clock steps %d..%d: samples missing or repeated" % (step.min(), step.max()))
    if np.any(np.diff(host) < 0):
        fail("host_ns goes back")

    # ground truth: every loud spike (SNR 8 and up) of probe A well inside the
    # recording shows as a trough on its channel within 2 samples of its time,
    # at least half its depth below the channel's level 0.5 ms before (the
    # emulator's noise: 7 uV = 2.3 LSB in the AP band; src/emu/neural.c)
    t0, t1 = int(clocks[0]), int(clocks[-1])
    idx = {int(c): i for i, c in enumerate(clocks)}
    seen = low = 0
    for line in open(truth):
        f = line.strip().split(",")
        if len(f) != 5 or not all(x.isdigit() for x in f[:4]):
            continue  # the header, or a last line cut by a kill
        if int(f[0]) != RAW_DEV or int(f[2]) >= 384:
            continue
        t, snr = int(f[3]), float(f[4])
        if snr < 8 or t not in idx or t < t0 + 10 * 8334 or t > t1 - 10 * 8334:
            continue
        seen += 1
        i, ch = idx[t], int(f[2])
        dip = int(samples[i:i + 3, ch].min()) - int(samples[i - 15, ch])
        if dip < -0.5 * snr * 2.3:
            low += 1
    print("check_openephys: %d ground-truth spikes inside, %d with their trough on their channel" % (seen, low))
    # (overlaps: ~12% of the time another unit's waveform is on a channel, its
    # positive lobe can fill a trough; a misplaced truth would find ~none)
    if seen < 5 or low < 0.8 * seen:
        fail("the ground truth's spikes are not where the recording has them")

    # digital inputs: an event per changed line, as the card's DigitalIO frames say
    evs = {e["stream_name"]: e for e in info["events"]}
    dio = [(t, p) for t, dev, p in fr if dev == DIO_DEV]
    want_ev = []
    last = None
    for t, p in dio:
        word = p[8] | (p[10] | p[11] << 8) << 8
        hub = int(np.frombuffer(p, dtype="<u8", count=1)[0])
        changed = word if last is None else word ^ last
        last = word
        for line in range(24):
            if changed >> line & 1:
                want_ev.append((hub, (line + 1) if word >> line & 1 else -(line + 1), word))
    if want_ev and prefix and "DigitalInputs" in evs:
        e = evs["DigitalInputs"]
        ed = os.path.join(rec, "events", e["folder_name"])
        m = len(np.load(os.path.join(ed, "sample_numbers.npy")))
        for f in ("timestamps.npy", "states.npy", "full_words.npy", "host_ns.npy"):
            if len(np.load(os.path.join(ed, f))) != m:
                fail("DigitalInputs " + f + " holds another count than sample_numbers.npy")
        want_ev = want_ev[:m]
    if want_ev and (not prefix or "DigitalInputs" in evs):
        if "DigitalInputs" not in evs:
            fail("no DigitalInputs events, the card sent %d changes" % len(want_ev))
        e = evs["DigitalInputs"]
        ed = os.path.join(rec, "events", e["folder_name"])
        esn = np.load(os.path.join(ed, "sample_numbers.npy"))
        est = np.load(os.path.join(ed, "states.npy"))
        ets = np.load(os.path.join(ed, "timestamps.npy"))
        ew = np.load(os.path.join(ed, "full_words.npy"))
        got = list(zip(esn.tolist(), est.tolist(), ew.tolist()))
        if got != want_ev:
            fail("DigitalInputs events: %d recorded, %d sent; first recorded %s, sent %s" %
                 (len(got), len(want_ev), got[:3], want_ev[:3]))
        if not np.array_equal(np.rint(ets * ACQ_HZ).astype(np.int64), esn):
            fail("DigitalInputs timestamps disagree with their acquisition-clock sample numbers")
        print("check_openephys: %d DigitalInputs events match the card's frames" % len(got))

    # stimuli and spikes the test sent (SPIKES: lines "stim,cause,pins" and "spike,clock,chan")
    if len(args) > 3 and not prefix:
        stims, spikes = [], []
        for line in open(args[3]):
            f = line.strip().split(",")
            if f[0] == "stim":
                stims.append((int(f[1]), int(f[2])))
            elif f[0] == "spike":
                spikes.append((int(f[1]), int(f[2])))
        if stims:
            e = evs["Stimuli"]
            ed = os.path.join(rec, "events", e["folder_name"])
            esn = np.load(os.path.join(ed, "sample_numbers.npy"))
            est = np.load(os.path.join(ed, "states.npy"))
            ew = np.load(os.path.join(ed, "full_words.npy"))
            want_s = []
            for cause, pins in stims:
                for line in range(8):
                    want_s.append((cause, (line + 1) if pins >> line & 1 else -(line + 1), pins))
            got = list(zip(esn.tolist(), est.tolist(), ew.tolist()))
            if got != want_s:
                fail("Stimuli events differ: %d recorded, %d sent" % (len(got), len(want_s)))
            print("check_openephys: %d stimuli (8 lines each) match" % len(stims))
        if spikes:
            sp = [s for s in info["spikes"] if s["stream_name"] == "PortA-ProbeA"]
            if not sp:
                fail("no spike channel for PortA-ProbeA")
            sd = os.path.join(rec, "spikes", sp[0]["folder"])
            ssn = np.load(os.path.join(sd, "sample_numbers.npy"), mmap_mode="r")
            sts = np.load(os.path.join(sd, "timestamps.npy"), mmap_mode="r")
            sel = np.load(os.path.join(sd, "electrode_indices.npy"), mmap_mode="r")
            scl = np.load(os.path.join(sd, "clusters.npy"), mmap_mode="r")
            wf = np.load(os.path.join(sd, "waveforms.npy"))
            if len(ssn) != len(spikes) or wf.shape[0] != len(spikes):
                fail("%d spikes recorded (%d waveforms), %d sent" % (len(ssn), wf.shape[0], len(spikes)))
            for k, (clk, ch) in enumerate(spikes):
                if int(round(sts[k] * ACQ_HZ)) != clk or int(sel[k]) != ch:
                    fail("spike %d: recorded %r, sent %r" % (k, (sts[k], sel[k]), (clk, ch)))
                if clk in idx and int(ssn[k]) != idx[clk]:
                    fail("spike %d: sample number %d, its sample is %d" % (k, ssn[k], idx[clk]))
            print("check_openephys: %d spikes match (sample numbers of their stream)" % len(spikes))
    print("check_openephys: ok")


if __name__ == "__main__":
    main()
