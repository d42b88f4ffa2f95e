#!/usr/bin/env python3
"""Seed inputs for the fuzzers (run from this directory; the outputs are committed).

fuzz_signal: a valid reset answer, DEVICETABLEACK (2 devices) and two
DEVICEINST packets, both as raw COBS signal bytes (first byte even) and in
fuzz_signal's packetized form (first byte odd, then [n][n bytes] per packet).

fuzz_json: a result set as bench/report.c writes it (meta, results, tables,
plots), with a command line of quotes, brackets, escapes and non-ASCII."""
import struct

ACK, INST = 32, 64  # ONI_SIG_DEVICETABLEACK, ONI_SIG_DEVICEINST (include/onidriver.h)


def cobs(data):
    out, block = bytearray(), bytearray()
    for b in data:
        if b == 0:
            out += bytes([len(block) + 1]) + block
            block = bytearray()
        else:
            block.append(b)
            if len(block) == 254:
                out += bytes([255]) + block
                block = bytearray()
    out += bytes([len(block) + 1]) + block
    return bytes(out)


def dev(idx, id_, ver, rsize, wsize):
    return struct.pack("<5I", idx, id_, ver, rsize, wsize)


packets = [
    struct.pack("<II", ACK, 2),
    struct.pack("<I", INST) + dev(0x000, 24, 1, 0, 0),
    struct.pack("<I", INST) + dev(0x001, 1, 2, 16, 8),
]
raw = b"".join(cobs(p) + b"\0" for p in packets)
assert raw[0] % 2 == 0
packed = b"\x01" + b"".join(bytes([len(p)]) + p for p in packets)
open("fuzz_signal/table2_raw", "wb").write(raw)
open("fuzz_signal/table2_packets", "wb").write(packed)

result_set = (
    '{\n  "meta": {\n    "hostname": "h",\n    "cores": 16,\n'
    '    "command": "onigpu run --out \\"a]b\\" \\\\x \\u0001 \\t \u00e9 \\ud83d\\ude00 \\"ai\\": 5, ]",\n'
    '    "roofline_error": null\n  },\n  "results": [\n'
    '    {"backend": "cpu", "block_frames": 16, "block_bytes": 12672, "ai": 9.74, "lat_p50_us": null, '
    '"recall": 1, "precision": 0.5, "x": -1.5e-300, "overrun": false},\n'
    '    {"backend": "gpu-staged", "data": "4kB", "compute": "40kB", "ai": 0.75}\n  ],\n'
    '  "tables": {"points": [{"ai": 0.25, "gflops": 10.4}]},\n  "plots": ["a-sizes.png"]\n}\n'
)
import json, os
json.loads(result_set)  # a valid seed
os.makedirs("fuzz_json", exist_ok=True)
open("fuzz_json/result_set", "w", encoding="utf-8").write(result_set)
