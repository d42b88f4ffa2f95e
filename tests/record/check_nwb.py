#!/usr/bin/python3
"""check_nwb.py FILE REF [--live MIN_ROWS] - check an NWB file onigpu wrote
with h5py (Debian's python3-h5py), against the NWB core schema 2.7.0's
requirements (facts from github.com/NeurodataWithoutBorders/nwb-schema:
core/nwb.file.yaml, nwb.base.yaml, nwb.ecephys.yaml, nwb.epoch.yaml and
hdmf-common's table.yaml), and read its data back equal to the card's
frames in REF (decoded as check_openephys.py decodes them, from
docs/devices.md). With --live the file is opened as HDF5's single-writer /
multiple-reader mode lets a reader follow a file being written (h5py
swmr=True) and must already hold MIN_ROWS rows of the probe, each equal to
the card's. Exit 0 when all holds; 1 with the first problem printed."""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_openephys as oe  # noqa: E402  (the REF decoder)

ACQ_HZ = 250e6


def fail(msg):
    print("check_nwb: " + msg)
    sys.exit(1)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def typed(obj, ns, t):
    a = obj.attrs
    if text(a.get("namespace", "")) != ns or text(a.get("neurodata_type", "")) != t:
        fail("%s: neurodata_type %s/%s, want %s/%s" % (obj.name, a.get("namespace"), a.get("neurodata_type"), ns, t))
    oid = text(a.get("object_id", ""))
    if len(oid) != 36 or oid.count("-") != 4:
        fail("%s: object_id %r is no UUID" % (obj.name, oid))


def schema(f):
    typed(f, "core", "NWBFile")
    if not text(f.attrs["nwb_version"]).startswith("2."):
        fail("nwb_version " + text(f.attrs["nwb_version"]))
    for d in ("file_create_date", "identifier", "session_description", "session_start_time",
              "timestamps_reference_time"):
        if d not in f or not isinstance(f[d], h5py.Dataset):
            fail("no dataset /" + d)
    if f["file_create_date"].ndim != 1:
        fail("file_create_date is not a list of dates")
    for g in ("acquisition", "analysis", "processing", "stimulus", "stimulus/presentation", "stimulus/templates",
              "general"):
        if g not in f or not isinstance(f[g], h5py.Group):
            fail("no group /" + g)
    el = f["general/extracellular_ephys/electrodes"]
    typed(el, "hdmf-common", "DynamicTable")
    cols = [text(c) for c in el.attrs["colnames"]]
    for c in ("location", "group", "group_name"):
        if c not in cols or c not in el:
            fail("electrodes lacks the required column " + c)
    typed(el["id"], "hdmf-common", "ElementIdentifiers")
    n = len(el["id"])
    for c in cols:
        typed(el[c], "hdmf-common", "VectorData")
        if len(el[c]) != n:
            fail("electrodes column %s: %d rows, id %d" % (c, len(el[c]), n))
    for i, r in enumerate(el["group"][:]):
        g = f[r]
        typed(g, "core", "ElectrodeGroup")
        if "description" not in g.attrs or "location" not in g.attrs:
            fail(g.name + ": no description or location")
        typed(g["device"], "core", "Device")
        if text(el["group_name"][i]) != g.name.split("/")[-1]:
            fail("electrode %d: group_name %s, group %s" % (i, el["group_name"][i], g.name))
    for name, s in f["acquisition"].items():
        t = text(s.attrs.get("neurodata_type"))
        if t not in ("ElectricalSeries", "TimeSeries", "AnnotationSeries"):
            fail("acquisition/%s is a %s" % (name, t))
        typed(s, "core", t)
        if "unit" not in s["data"].attrs:
            fail(name + ": data has no unit")
        ts = s["timestamps"]
        if text(ts.attrs["unit"]) != "seconds" or int(ts.attrs["interval"]) != 1:
            fail(name + ": timestamps' unit or interval")
        if t == "AnnotationSeries":  # nwb.misc.yaml: text data, unit n/a, resolution -1
            if s["data"].dtype.kind not in "SOU" or float(s["data"].attrs["resolution"]) != -1.0 or \
                    text(s["data"].attrs["unit"]) != "n/a" or len(s["data"]) != len(ts):
                fail(name + ": an AnnotationSeries needs text data of unit n/a, resolution -1, a time each")
        if t == "ElectricalSeries":
            e = s["electrodes"]
            typed(e, "hdmf-common", "DynamicTableRegion")
            if f[e.attrs["table"]].name != el.name:
                fail(name + ": electrodes do not point at the electrodes table")
            if s["data"].shape[1] != len(e) or max(e[:]) >= n:
                fail(name + ": %d channels, %d electrodes" % (s["data"].shape[1], len(e)))
    if "intervals/stimuli" in f:
        t = f["intervals/stimuli"]
        typed(t, "core", "TimeIntervals")
        for c in ("start_time", "stop_time"):
            typed(t[c], "hdmf-common", "VectorData")
            if len(t[c]) != len(t["id"]):
                fail("intervals/stimuli/%s: %d rows, id %d" % (c, len(t[c]), len(t["id"])))
    print("check_nwb: the NWB core schema's required groups, datasets and attributes are there")


def data(f, ref, least):
    s = f["acquisition/PortA-ProbeA"]
    d, ts = s["data"], s["timestamps"]
    rows = min(d.shape[0], ts.shape[0])
    if least is None and d.shape[0] != ts.shape[0]:
        fail("data %d rows, timestamps %d" % (d.shape[0], ts.shape[0]))
    want, clocks = oe.decode_np2e(oe.frames(ref), 0)
    if least is not None:
        if rows < least:
            fail("a live reader sees %d rows, fewer than %d" % (rows, least))
        want, clocks = want[:rows], clocks[:rows]
    elif rows != want.shape[0]:
        fail("%d rows, the card sent %d super-frames" % (rows, want.shape[0]))
    got = d[:rows]
    if not np.array_equal(got, want):
        r, c = np.argwhere(got != want)[0]
        fail("row %d channel %d: %d, the card sent %d" % (r, c, got[r, c], want[r, c]))
    if not np.array_equal(np.rint(ts[:rows] * ACQ_HZ).astype(np.uint64), clocks):
        fail("timestamps are not the super-frames' hub clocks / 250 MHz")
    conv = float(d.attrs["conversion"])
    if abs(conv - 0.195e-6) > 1e-12 or text(d.attrs["unit"]) != "volts":
        fail("conversion %g %s, want 0.195e-6 volts" % (conv, text(d.attrs["unit"])))
    print("check_nwb: %d rows x 384 channels equal to the card's super-frames%s" %
          (rows, " (read live)" if least is not None else ""))


def main():
    if len(sys.argv) < 3:
        fail("usage: check_nwb.py FILE REF [--live MIN_ROWS]")
    live = sys.argv[3:4] == ["--live"]
    f = h5py.File(sys.argv[1], "r", libver="latest", swmr=True) if live else h5py.File(sys.argv[1], "r")
    schema(f)
    data(f, sys.argv[2], int(sys.argv[4]) if live else None)
    print("check_nwb: ok")


main()
