#!/usr/bin/env python3
"""Turns a spool file (a guarded process's, left by a SIGKILL or a crash) into an input for fuzz-spool.

    scripts/spool-seed.py SPOOL_FILE OUTPUT

The fuzz target rebuilds the file from patches (tests/fuzz/fuzz_spool.c describes the form) in a
file of the whole layout's size: the header page, each ring the header says the file holds (its
counters and its last records with their checksums, the tail moved up to them, and its overflow
aggregates), and each blob slot the file holds, up to its text's length, so that a seed stays a few
kilobytes while the file is megabytes. The layout is include/p2pguard/spool.h's (P2PGSPL6).
"""
import struct
import sys

HEADER = 4096
THREADS, RING, BLOBS, BLOB_SIZE = 128, 65536, 128, 24 << 10
RING_COUNTERS = 64  # head, tail, state, serial, dropped, tid, pad, folded, pad: one cache line
AGGS, AGG_SIZE = 256, 72  # a thread's overflow aggregates, after its records' checksums
THREAD_SIZE = 4476928  # sizeof(struct p2pg_spool_thread): whole pages
RECORDS = RING_COUNTERS  # offset of rec[] in a ring
CRCS = RECORDS + RING * 64  # offset of crc[]
AGGREGATES = CRCS + RING * 4  # offset of agg[]
RINGS_IN_FILE, BLOBS_IN_FILE = 2328, 2348  # header fields (include/p2pguard/spool.h)
RECORDS_KEPT = 32
FULL_SIZE = 4  # fuzz_spool.c's flag: the file has the whole layout's size


def patch(offset, data):
    out = b""
    for k in range(0, len(data), 65535):
        chunk = data[k:k + 65535]
        out += struct.pack("<IH", offset + k, len(chunk)) + chunk
    return out


def main():
    src, dst = sys.argv[1], sys.argv[2]
    seed = bytes([FULL_SIZE])  # no template, no truncation: the file as it was
    with open(src, "rb") as f:
        header = f.read(HEADER)
        seed += patch(0, header)
        rings = int.from_bytes(header[RINGS_IN_FILE:RINGS_IN_FILE + 16], "little")
        blobs = min(struct.unpack_from("<I", header, BLOBS_IN_FILE)[0], BLOBS)
        for k in range(blobs):
            base = HEADER + k * BLOB_SIZE
            f.seek(base)
            head = f.read(64)
            if not any(head):
                continue
            length, = struct.unpack_from("<I", head, 52)
            seed += patch(base, head + f.read(min(length, BLOB_SIZE - 64)))
        for k in range(THREADS):
            if not rings >> k & 1:
                continue
            base = HEADER + BLOBS * BLOB_SIZE + k * THREAD_SIZE
            f.seek(base)
            counters = f.read(RING_COUNTERS)
            head, tail = struct.unpack_from("<QQ", counters, 0)
            # The last records only, as if the drainer had persisted the rest: a seed a fuzzer
            # can mutate quickly, and every record in it a real one.
            if head >= tail and head - tail <= RING:
                tail = max(tail, head - RECORDS_KEPT)
                counters = counters[:8] + struct.pack("<Q", tail) + counters[16:]
            seed += patch(base, counters)
            for seq in range(tail, head):
                slot = seq % RING
                f.seek(base + RECORDS + slot * 64)
                seed += patch(base + RECORDS + slot * 64, f.read(64))
                f.seek(base + CRCS + slot * 4)
                seed += patch(base + CRCS + slot * 4, f.read(4))
            for a in range(AGGS):
                at = base + AGGREGATES + a * AGG_SIZE
                f.seek(at)
                agg = f.read(AGG_SIZE)
                if any(agg):
                    seed += patch(at, agg)
    with open(dst, "wb") as f:
        f.write(seed)


if __name__ == "__main__":
    main()
