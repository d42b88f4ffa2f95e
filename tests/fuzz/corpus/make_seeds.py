#!/usr/bin/env python3
"""Seed inputs for the fuzzers (run from this directory; the outputs are committed).

fuzz_signal: a valid reset answer, DEVICETABLEACK (2 devices) and two
DEVICEINST packets, both as raw COBS signal bytes (first byte even) and in
fuzz_signal's packetized form (first byte odd, then [n][n bytes] per packet).

fuzz_net: requests in fuzz_net's record form (init, running on, data
and signal reads, a write frame, options), raw messages (mode 0: a HELLO,
another version's HELLO, a body longer than its header says) and a server's
answer header for the client's parser (mode 2).

fuzz_api: call sequences in fuzz_api's encoding (an op byte, op % 20, then
its arguments): init, frames on the data stream read and kept, a write
frame made and sent, registers, RUNNING on and off, RESET, every option
got, a write cut short and its rest sent first, and the context destroyed
while frames are alive.

fuzz_view: POST /control bodies (first byte 0), --view addresses (1) and
Host headers (2), good and refused ones.

fuzz_npy: .npy files as the template file set has them (first byte even:
its bits 1.. pick the dimensions asked for, 3 for templates.npy) and
params.py texts (first byte odd)."""
import os
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

# fuzz_api ops (tests/fuzz/fuzz_api.c, step): byte values of op % 20.
DESTROY, INIT, GET, SET, DATA, SIGNAL, DEVTABLE, KNOB = 0, 1, 3, 5, 8, 9, 10, 11
RREG, WREG, READ, DFRAME, CFRAME, WFRAME, MISC = 12, 13, 14, 16, 17, 18, 19
RUNNING, RESET, BLOCKREAD = 2, 3, 10
init = bytes([INIT, 0])
frames = bytes([DATA, 2 * 7]) + bytes(b for i in range(8) for b in (i % 5, i))  # 8 frames
read_keep = bytes([READ, 0x80 | 7])
write = bytes([CFRAME, 1, 1, WFRAME, 8])
regs = bytes([WREG, 5]) + struct.pack("<I", 0xDEADBEEF) + bytes([RREG, 5, 0, 0, 0, 0])
run = lambda v: bytes([SET, RUNNING, v, 2, 1])
reset = bytes([SET, RESET, 1, 2, 1])
gets = b"".join(bytes([GET, opt, size, 1]) for opt in range(12) for size in (2, 200))
os.makedirs("fuzz_api", exist_ok=True)
seeds = {
    "frames_kept": init + frames + read_keep + bytes([DFRAME, 2]) + bytes([DESTROY]),
    "write_regs": init + write + regs + write,
    "run_reset": init + frames + run(1) + read_keep + run(0) + reset + read_keep,
    "options": init + gets + bytes([SET, BLOCKREAD, 2, 2, 1, MISC, 1, 2, 3, 4, 5]),
    # a write the driver takes 4 bytes of (WRITEROOM 4), then room again: the rest goes first
    "write_cut_short": init + bytes([CFRAME, 1, 1, KNOB, 7, 4, WFRAME, 0, KNOB, 7, 1, WFRAME, 0]),
    "knobs": bytes([KNOB, 1, 3, KNOB, 5, 3, KNOB, 3, 2]) + init + frames + read_keep + write,
}
for name, data in seeds.items():
    open("fuzz_api/" + name, "wb").write(bytes([1]) + data)  # flags 1: destroyed before the frames

# fuzz_net (tests/fuzz/fuzz_net.c). Types: src/drivers/net/netproto.h.
HELLO, ATTACH, NINIT, NREAD, NWRITE, CREAD, CWRITE, OPTCB, SETOPT, GETOPT = range(1, 11)
REPLY, MAGIC, VERSION = 0x80, 0x54454E4F, 4  # NETP_VERSION


def rec(t, what, arg, extra=b""):
    return bytes([t]) + struct.pack("<II", what & 0xFFFFFFFF, arg) + bytes([len(extra)]) + extra


def msg(hdr, body=b""):  # mode 0's record: [u8 hlen][header][u16 blen][body]
    return bytes([len(hdr)]) + hdr + struct.pack("<H", len(body)) + body


def call(t, seq, what=0, arg=0, token=0, body=b"", version=VERSION):
    return msg(struct.pack("<IHHII", MAGIC, version, t, seq, 16 + len(body)) + struct.pack("<IIQ", what, arg, token),
               body)


CONFIG_RUNNING = 2  # oni_config_t (include/onidefs.h)
sink_frame = struct.pack("<II", 4, 4) + bytes(16)  # device 0.4 (TESTSINK), 4 words
os.makedirs("fuzz_net", exist_ok=True)
for old in os.listdir("fuzz_net"):
    os.remove("fuzz_net/" + old)
net_seeds = {
    "records_stream": bytes([1]) + rec(NINIT, -1, 0) + rec(CWRITE, CONFIG_RUNNING, 1) + rec(NREAD, 0, 4096) +
    rec(NREAD, 1, 256) + rec(NWRITE, 0, 0, sink_frame) + rec(CREAD, CONFIG_RUNNING, 0),
    "records_options": bytes([1]) + rec(SETOPT, 0x4F470400, 0, b"abcd") + rec(GETOPT, 0x4F470400, 40) +
    rec(NINIT, -1, 0) + rec(GETOPT, 0x4F470401, 4),
    "raw_hello": bytes([0]) + call(HELLO, 1) + call(NINIT, 2, 0xFFFFFFFF) + call(CREAD, 3, CONFIG_RUNNING),
    # another version's client: answered, then closed on
    "raw_other_version": bytes([0]) + call(HELLO, 1, version=VERSION - 1),
    # a body longer than its header says: closed on, no answer
    "raw_body_longer": bytes([0]) + call(HELLO, 1) + msg(struct.pack("<IHHII", MAGIC, VERSION, SETOPT, 2, 16 + 4) +
                                                         struct.pack("<IIQ", 0x4F470400, 4, 0), b"abcdefgh"),
    # mode 2: a well-formed answer to HELLO, name included
    "answer_hello": bytes([2, 32]) + struct.pack("<H", 10) + struct.pack("<IHHII", MAGIC, VERSION, HELLO | REPLY, 1,
                                                                         16 + 10) + struct.pack("<iIQ", 0, 0, 7),
}
for name, data in net_seeds.items():
    open("fuzz_net/" + name, "wb").write(data)

view_seeds = {
    "control_k": b"\x00k=4.5",
    "control_both": b"\x00channels=0,17,383&k=6",
    "control_twice": b"\x00k=4&k=5",
    "control_unknown": b"\x00colour=red",
    "addr_port": b"\x018080",
    "addr_host": b"\x010.0.0.0:0",
    "addr_localhost": b"\x01localhost:9",
    "addr_bad": b"\x01myhost:80",
    "host_tunnel": b"\x02localhost:9000",
    "host_bound": b"\x0210.1.2.3:8080",
    "host_rebound": b"\x02evil.example:80",
}
for name, data in view_seeds.items():
    open("fuzz_view/" + name, "wb").write(data)


def npy(descr, shape, data):
    dims = "(%d,)" % shape[0] if len(shape) == 1 else "(" + ", ".join(str(d) for d in shape) + ")"
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, dims)
    pad = 64 - (10 + len(d) + 1) % 64
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d) + pad + 1) + (d + " " * pad + "\n").encode() + data


npy_seeds = {  # the first byte: (ndim - 1) << 1 for npy_check, 1 for params.py
    "templates": bytes([2 << 1]) + npy("<f4", (2, 3, 4), struct.pack("<24f", *range(24))),
    "channel_map": bytes([0]) + npy("<i4", (4,), struct.pack("<4i", 0, 1, 2, 3)),
    "whitening": bytes([1 << 1]) + npy("<f8", (2, 2), struct.pack("<4d", 1, 0, 0, 1)),
    "short": bytes([0]) + npy("<i8", (3,), struct.pack("<2q", 1, 2)),
    "params": b"\x01dat_path = 'a.bin'\nsample_rate = 30000.\nhp_filtered = False\n",
    "params_bad": b"\x01sample_rate = fast # no\nhp_filtered = True\n",
}
os.makedirs("fuzz_npy", exist_ok=True)
for name, data in npy_seeds.items():
    open("fuzz_npy/" + name, "wb").write(data)
