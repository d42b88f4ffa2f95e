#!/usr/bin/python3
"""record_messages.py ONIGPU OUTDIR - a change made from the live view's
page lands in the recording's messages (CTest view_record_messages,
docs/view.md, docs/recording.md). Runs `onigpu run --view --view-token
--record` on the CPU backend, raises the threshold to k = 20 through the
page's control endpoint (POST /control, as the page sends it) 2 s into
acquisition, then reads the recording back with numpy (and h5py for NWB):

- Open Ephys: structure.oebin lists an event channel of stream_name
  MessageCenter; events/MessageCenter/text.npy holds fixed-width byte
  strings (dtype |S<n>, as open-ephys-python-tools' load_messages reads
  them) with the change's line; its sample number is on the acquisition
  clock (timestamps = sample_numbers / 250 MHz) and inside the probe's
  recorded samples; and the recorded detections fall at that time: the
  second before it has spikes, the time from 0.2 s after it less than a
  tenth of their rate (k = 20 leaves few of the emulated units).
- NWB: acquisition/messages, an AnnotationSeries, holds the same line at a
  time inside the probe's series.
Exit 0 passed, 1 failed, 77 skipped (no numpy)."""
import glob
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

try:
    import numpy as np
except ImportError:
    print("SKIP: no numpy (Debian: apt-get install python3-numpy)")
    sys.exit(77)

ACQ_HZ = 250e6
failed = 0


def check(ok, what):
    global failed
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failed += 1
    return ok


def run(onigpu, outdir, fmt):
    """The run with the change from the page; its output, the recording's directory."""
    rec = os.path.join(outdir, "rec-" + fmt)
    subprocess.run(["rm", "-rf", rec], check=True)
    token = "msg-test-%d-%d" % (os.getpid(), int(time.time()))
    tok = os.path.join(outdir, "token-" + fmt)
    with open(tok, "w") as f:
        f.write(token + "\n")
    p = subprocess.Popen([onigpu, "run", "--backend", "cpu", "--block", "30", "--seconds", "6", "--view",
                          "127.0.0.1:0", "--view-token", tok, "--record", rec, "--format", fmt],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    out, url, posted = "", None, False
    for line in p.stdout:
        out += line
        m = re.search(r"live view at (http://127\.0\.0\.1:\d+/)", line)
        if m:
            url = m.group(1)
        # the progress line of 2 s into acquisition: the detector is calibrated and detecting
        if url and not posted and re.match(r"\s+2\.\d s ", line):
            rq = urllib.request.Request(url + "control", data=b"k=20", method="POST",
                                        headers={"X-Onigpu-Token": token, "Content-Type": "text/plain"})
            with urllib.request.urlopen(rq, timeout=10) as r:
                check(r.status == 200, "%s: POST /control k=20: 200" % fmt)
            posted = True
    code = p.wait(timeout=60)
    check(code == 0, "%s: the run exited 0 (%s)" % (fmt, code))
    check(posted, "%s: the change was sent during the run" % fmt)
    check(re.search(r"view: threshold k=20 ", out) is not None, "%s: the run reported the change" % fmt)
    if failed:
        print(out)
    return rec


def openephys(rec):
    tops = glob.glob(os.path.join(rec, "*", "experiment1", "recording1"))
    if not check(len(tops) == 1, "openephys: one recording folder"):
        return
    top = tops[0]
    info = json.load(open(os.path.join(top, "structure.oebin")))
    ev = [e for e in info["events"] if e.get("stream_name") == "MessageCenter"]
    if not check(len(ev) == 1, "structure.oebin lists one MessageCenter event channel"):
        return
    d = os.path.join(top, "events", "MessageCenter")
    check(os.path.normpath(os.path.join(top, "events", ev[0]["folder_name"])) == d,
          "its folder is events/MessageCenter")
    text = np.load(os.path.join(d, "text.npy"))
    sn = np.load(os.path.join(d, "sample_numbers.npy"))
    ts = np.load(os.path.join(d, "timestamps.npy"))
    check(text.dtype.kind == "S" and sn.dtype == np.int64 and ts.dtype == np.float64,
          "text.npy |S%d, sample_numbers int64, timestamps float64" % text.dtype.itemsize)
    msgs = [t.decode("utf-8") for t in text]  # as load_messages decodes them
    print("messages:", msgs, "at", sn.tolist())
    if not check(len(msgs) == 1 and msgs[0].startswith("threshold k=20 "), "one message: the threshold change"):
        return
    check(len(sn) == 1 and len(ts) == 1 and abs(ts[0] - sn[0] / ACQ_HZ) < 1e-9,
          "its timestamp is its sample number on the acquisition clock")
    cont = [c for c in info["continuous"] if c["stream_name"] == "PortA-ProbeA"][0]
    cts = np.load(os.path.join(top, "continuous", cont["folder_name"], "timestamps.npy"), mmap_mode="r")
    t = ts[0]
    check(cts[0] < t < cts[-1], "it lies inside the probe's samples (%.3f s in %.3f..%.3f)" % (t, cts[0], cts[-1]))
    sp = [s for s in info["spikes"] if s["stream_name"] == "PortA-ProbeA"][0]
    sts = np.load(os.path.join(top, "spikes", sp["folder"], "timestamps.npy"))
    before = np.count_nonzero((sts >= t - 1.0) & (sts < t)) / 1.0
    span = cts[-1] - (t + 0.2)
    after = np.count_nonzero(sts >= t + 0.2) / span if span > 0.5 else float("nan")
    print("recorded detections: %.0f /s in the second before the message, %.1f /s from 0.2 s after" %
          (before, after))
    check(before >= 10 and after < before / 10, "the detections fall at the message's time")


def nwb(rec):
    try:
        import h5py
    except ImportError:
        print("skip NWB: no h5py")
        return
    f = h5py.File(os.path.join(rec, "onigpu.nwb"), "r")
    m = f["acquisition/messages"]
    nt = m.attrs["neurodata_type"]
    check((nt.decode() if isinstance(nt, bytes) else nt) == "AnnotationSeries",
          "nwb: acquisition/messages is an AnnotationSeries")
    data = [x.decode("utf-8") if isinstance(x, bytes) else x for x in m["data"][:]]
    ts = m["timestamps"][:]
    print("nwb messages:", data, "at", ts.tolist())
    if not check(len(data) == 1 and data[0].startswith("threshold k=20 "), "nwb: one message: the threshold change"):
        return
    pts = f["acquisition/PortA-ProbeA/timestamps"]
    check(pts[0] < ts[0] < pts[-1], "nwb: it lies inside the probe's samples")


def main():
    if len(sys.argv) != 3:
        print("usage: record_messages.py ONIGPU OUTDIR")
        sys.exit(2)
    onigpu, outdir = sys.argv[1:]
    os.makedirs(outdir, exist_ok=True)
    openephys(run(onigpu, outdir, "openephys"))
    h = subprocess.run([sys.executable, "-c", "import h5py"], capture_output=True).returncode == 0
    if h and not failed:
        nwb(run(onigpu, outdir, "nwb"))
    print("%d checks failed" % failed if failed else "all checks passed")
    sys.exit(1 if failed else 0)


main()
