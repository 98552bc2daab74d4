#!/usr/bin/env python3
# Regenerates tests/corpus/report/, the seeds of the report fuzzer
# (tools/fuzz/fuzz_report.cpp) besides the capture corpus it also reads:
#   *.raw  METADATA '\n' RECORDS (a chunk's raw content) cut from
#          tests/fixtures/straggler.cap: the fuzzer wraps them into a valid
#          capture, so mutations reach the analysis past the chunk checksum;
#          (bad-utf8-comm.raw: thread names that are not UTF-8);
#   *.cap  small crafted captures: wrong-typed metadata and trailer fields,
#          metadata that is not an object, each trailer end reason.
#   tools/fuzz/make-report-corpus.py [SOURCE_DIR]
import json, os, struct, sys, zlib

top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
out = os.path.join(top, "tests", "corpus", "report")
d = open(os.path.join(top, "tests", "fixtures", "straggler.cap"), "rb").read()
ver, abi, mlen = struct.unpack_from("<III", d, 8)
meta = d[20:20 + mlen]
off, raw = 20 + mlen, b""
while d[off:off + 4] == b"STCK":
    rl, zl, _ = struct.unpack_from("<III", d, off + 4)
    raw += zlib.decompress(d[off + 16:off + 16 + zl])
    off += 16 + zl
recs, p = [], 0
while p < len(raw):
    (n,) = struct.unpack_from("<I", raw, p)
    recs.append(raw[p:p + 4 + n])
    p += 4 + n
kind = lambda r: struct.unpack_from("<H", r, 6)[0]  # after the u32 length: u16 size, u16 kind


def write(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


# Every step of both ranks without the scheduler records (~65 KB), and the first 40 KB of all.
write("straggler-nosched.raw", meta + b"\n" + b"".join(r for r in recs if kind(r) not in (1, 2)))
head, size = [], 0
for r in recs:
    if size + len(r) > 40000:
        break
    head.append(r)
    size += len(r)
write("straggler-head.raw", meta + b"\n" + b"".join(head))

# Thread names that are not UTF-8 (0xff, a character cut short): every JSON sink threw on them.
bad = []
for r in [r for r in recs if kind(r) not in (1, 2)][:300]:
    if kind(r) in (3, 4, 5, 6):  # task new/exec/exit/comm: the name is the last 16 bytes
        r = r[:-16] + b"\xff\xe6\x97" + r[-13:]
    bad.append(r)
write("bad-utf8-comm.raw", meta + b"\n" + b"".join(bad))


def capture(meta_json, records, trailer):
    m = meta_json.encode()
    b = b"STEPTRCE" + struct.pack("<III", 1, abi, len(m)) + m
    if records:
        r = b"".join(records)
        z = zlib.compress(r, 1)
        b += b"STCK" + struct.pack("<III", len(r), len(z), zlib.crc32(r)) + z
    if trailer is not None:
        t = json.dumps(trailer).encode()
        b += b"STTR" + struct.pack("<I", len(t)) + t
    return b


some = recs[:200]
zeros = [0] * 15
ok = {"emitted": zeros, "dropped": zeros, "records": len(some), "window_end_ns": 0}
write("meta-wrong-types.cap", capture(json.dumps({"window_start_ns": "soon", "ring_mib": -3, "drain_ms": 1e300,
                                                  "attach_tiers": [1, 2]}), some, ok))
write("meta-array.cap", capture("[1, 2, 3]", some, ok))
write("meta-huge-uint.cap", capture(json.dumps({"ring_mib": 2**64 - 1, "window_start_ns": 2**64 - 1}), some, ok))
write("end-write-error.cap", capture("{}", some, dict(ok, end="write_error: No space left on device")))
write("end-max-size.cap", capture("{}", some, dict(ok, end="max_size")))
write("end-wrong-type.cap", capture("{}", some, dict(ok, end=5, records="many", window_end_ns=-1)))
write("trailer-count-mismatch.cap", capture("{}", some, dict(ok, records=len(some) + 100)))
print("wrote", sorted(os.listdir(out)))
