#!/usr/bin/env python3
"""Turns a spool file (a guarded process's, left by a SIGKILL) into an input for fuzz-spool.

    scripts/spool-seed.py SPOOL_FILE OUTPUT

The fuzz target rebuilds the file from patches (tests/fuzz/fuzz_spool.c describes the form):
the header page, each used ring's counters and its last records (the tail moved up to them), and each written blob up to its
text's length, so that a seed stays a few kilobytes while the file is half a gigabyte.
"""
import struct
import sys

HEADER = 4096
THREADS, RING, BLOBS, BLOB_SIZE = 128, 65536, 128, 24 << 10
RING_COUNTERS = 64  # head, tail, state, serial, dropped, tid, pad: one cache line
AGGS, AGG_SIZE = 256, 40  # a thread's overflow aggregates, after its ring
RING_BYTES = RING_COUNTERS + RING * 64 + AGGS * AGG_SIZE
RECORDS_KEPT = 32


def patch(offset, data):
    out = b""
    for k in range(0, len(data), 65535):
        chunk = data[k:k + 65535]
        out += struct.pack("<IH", offset + k, len(chunk)) + chunk
    return out


def main():
    src, dst = sys.argv[1], sys.argv[2]
    seed = b"\x00"  # no template, no truncation: the file as it was
    with open(src, "rb") as f:
        f.seek(0)
        seed += patch(0, f.read(HEADER))
        for k in range(THREADS):
            base = HEADER + k * RING_BYTES
            f.seek(base)
            counters = f.read(RING_COUNTERS)
            head, tail = struct.unpack_from("<QQ", counters, 0)
            if head == 0 and not any(counters):
                continue
            # The last records only, as if the drainer had persisted the rest: a seed a fuzzer
            # can mutate quickly, and every record in it a real one.
            if head >= tail and head - tail <= RING:
                tail = max(tail, head - RECORDS_KEPT)
                counters = counters[:8] + struct.pack("<Q", tail) + counters[16:]
            seed += patch(base, counters)
            for seq in range(tail, head):
                slot = base + RING_COUNTERS + (seq % RING) * 64
                f.seek(slot)
                seed += patch(slot, f.read(64))
            for a in range(AGGS):
                at = base + RING_COUNTERS + RING * 64 + a * AGG_SIZE
                f.seek(at)
                agg = f.read(AGG_SIZE)
                if any(agg):
                    seed += patch(at, agg)
        for k in range(BLOBS):
            base = HEADER + THREADS * RING_BYTES + k * BLOB_SIZE
            f.seek(base)
            head = f.read(64)
            if not any(head):
                continue
            length, = struct.unpack_from("<I", head, 56)
            seed += patch(base, head + f.read(min(length, BLOB_SIZE - 64)))
    with open(dst, "wb") as f:
        f.write(seed)


if __name__ == "__main__":
    main()
