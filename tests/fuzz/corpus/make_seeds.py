#!/usr/bin/env python3
"""Seed inputs for the fuzzers (run from this directory; the outputs are committed).

fuzz_signal: a valid reset answer, DEVICETABLEACK (2 devices) and two
DEVICEINST packets, both as raw COBS signal bytes (first byte even) and in
fuzz_signal's packetized form (first byte odd, then [n][n bytes] per packet)."""
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
