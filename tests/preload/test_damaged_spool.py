"""A spool file that a crash, a disk or a person damaged: `p2pguard recover` and a starting guard
import what is intact, skip the damage with one line and count it in processes.records_invalid,
keep the file aside as `<file>.damaged` (never deleted), never crash, never turn garbage into rows
(every record carries a CRC32C beside it; impossible values are refused as well), and the guarded
program's output stays its own."""
import glob
import os
import random
import shutil
import sqlite3
import struct
import time
from harness import *

# include/p2pguard/spool.h, layout P2PGSPL6: the header page, 128 blob slots, then the rings
# (counters, 65,536 records, their checksums, the overflow aggregates, whole pages).
HEADER, BLOBS, BLOB_SIZE, RECORD = 4096, 128, 24 << 10, 64
RING_BYTES = 4476928
RINGS = HEADER + BLOBS * BLOB_SIZE
RINGS_IN_FILE = 2328


def killed_spool():
    """A real spool: rt_peer copying on 2 threads, SIGKILLed; its database holds nothing yet."""
    db = tempdb()
    counts = db + ".counts"
    # Another connection holds the write lock meanwhile, so that the drainer imports nothing,
    # however fast it would have been: the rings keep every record for the damage below.
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    proc = subprocess.Popen([program("rt_peer"), "copier", counts, "2"], env=environment(db),
                            stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()  # READY
    wait_for_copies(counts, 2)
    proc.kill()
    proc.wait()
    holder.execute("ROLLBACK")
    holder.close()
    files = glob.glob(db + ".spool/*.spool6")
    equal(len(files), 1, "a SIGKILLed process leaves its spool")
    return files[0]


def rings(path):
    """(ring, head, tail) of each used ring the file holds."""
    used = []
    with open(path, "rb") as f:
        f.seek(RINGS_IN_FILE)
        in_file = int.from_bytes(f.read(16), "little")
        for k in range(128):
            if not in_file >> k & 1:
                continue
            f.seek(RINGS + k * RING_BYTES)
            head, tail = struct.unpack("<QQ", f.read(16))
            if head:
                used.append((k, head, tail))
    return used


def ring_offset(ring):
    return RINGS + ring * RING_BYTES


def record_offset(ring, seq):
    return ring_offset(ring) + 64 + (seq % 65536) * RECORD


def fresh_copy(spool):
    """The spool under a new database's spool folder, as a crashed process of it left it."""
    db = tempdb()
    folder = db + ".spool"
    os.makedirs(folder, mode=0o700)
    target = os.path.join(folder, os.path.basename(spool))
    subprocess.run(["cp", "--sparse=always", spool, target], check=True)
    return db, target


def recover(db):
    return subprocess.run([CLI, "recover", db], capture_output=True, text=True,
                          env=environment(preload=False))


def p2pguard_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("p2pguard:")]


original = killed_spool()
used = rings(original)
check(len(used) >= 1 and all(head - tail > 8 for _, head, tail in used), "the copier's rings hold records: %s" % used)
intact = sum(head - tail for _, head, tail in used)

# The undamaged file: every record, no line about damage.
db, path = fresh_copy(original)
proc = recover(db)
equal(proc.returncode, 0, "recover of an intact spool exits 0")
equal(scalar(db, "SELECT count(*) FROM transfers"), intact, "every record of the intact spool is a row")
equal(scalar(db, "SELECT records_invalid FROM processes"), 0, "nothing counted invalid")

# Bit flips: the kind byte of 3 records, the path byte of 2 (offsets 38 and 39 in a record).
ring, head, tail = used[0]
db, path = fresh_copy(original)
with open(path, "r+b") as f:
    for seq, byte, value in [(tail, 38, 0x41), (tail + 1, 38, 0x00), (tail + 2, 38, 0xff),
                             (tail + 3, 39, 0x09), (tail + 4, 39, 0x80)]:
        f.seek(record_offset(ring, seq) + byte)
        f.write(bytes([value]))
proc = recover(db)
equal(proc.returncode, 0, "recover of a bit-flipped spool exits 0")
lines = p2pguard_lines(proc.stderr)
equal(len(lines), 1, "one line about the damage: %s" % lines)
check("5 damaged records skipped" in proc.stderr, "the line counts the 5 flipped records")
equal(scalar(db, "SELECT count(*) FROM transfers"), intact - 5, "the intact records are rows")
equal(scalar(db, "SELECT records_invalid FROM processes"), 5, "processes.records_invalid = 5")
equal(scalar(db, "SELECT count(*) FROM transfers WHERE path NOT IN ('p2p','driver','staged','captured')"), 0,
      "no garbage path in any row")

# A zero-filled page in the middle of the ring (a crash's lost page): 64 records gone, counted.
db, path = fresh_copy(original)
zeroed = min(64, head - tail)
with open(path, "r+b") as f:
    f.seek(record_offset(ring, tail))
    f.write(bytes(zeroed * RECORD))
proc = recover(db)
equal(proc.returncode, 0, "recover of a zero-filled spool exits 0")
equal(len(p2pguard_lines(proc.stderr)), 1, "one line")
equal(scalar(db, "SELECT count(*) FROM transfers"), intact - zeroed, "the rest are rows")
equal(scalar(db, "SELECT records_invalid FROM processes"), zeroed, "the zeroed records are counted")

# A ring whose counters no writer leaves (tail past head): skipped whole, counted once.
db, path = fresh_copy(original)
with open(path, "r+b") as f:
    f.seek(ring_offset(ring) + 8)
    f.write(struct.pack("<Q", head + 5))
proc = recover(db)
equal(proc.returncode, 0, "recover with a damaged ring exits 0")
equal(scalar(db, "SELECT count(*) FROM transfers"), intact - (head - tail), "the other rings' records are rows")
equal(scalar(db, "SELECT records_invalid FROM processes"), 1, "the damaged ring counts once")

# A header of another layout (a flipped ring size): nothing imported, the file set aside, one line.
db, path = fresh_copy(original)
with open(path, "r+b") as f:
    f.seek(20)  # header.ring
    f.write(struct.pack("<I", 65536 ^ 0x100))
proc = recover(db)
equal(proc.returncode, 0, "recover with a damaged header exits 0")
lines = p2pguard_lines(proc.stderr)
equal(len(lines), 1, "one line: %s" % lines)
check("damaged header" in proc.stderr and os.path.exists(path + ".damaged"), "the file is kept as .damaged")
equal(scalar(db, "SELECT count(*) FROM transfers"), 0, "nothing of it imported")
proc = recover(db)
equal(p2pguard_lines(proc.stderr), [], "a second recover says nothing more about it")

# Truncated inside its last ring (a full disk while the file was copied): no SIGBUS; the rings
# the file still holds are imported, the cut one is counted, and the file is kept aside, never
# deleted (a person may still get more out of it).
db, path = fresh_copy(original)
last = max(k for k, _, _ in used)
os.truncate(path, ring_offset(last) + RING_BYTES // 2)
proc = recover(db)
equal(proc.returncode, 0, "recover of a truncated spool exits 0")
lines = p2pguard_lines(proc.stderr)
equal(len(lines), 1, "one line about the truncated file: %s" % lines)
check(lines and "truncated" in lines[0] and ".damaged" in lines[0], "the line says truncated and where the file is kept")
check(os.path.exists(path + ".damaged") and not os.path.exists(path), "the truncated file is kept as .damaged")
equal(scalar(db, "SELECT count(*) FROM transfers"), sum(h - t for k, h, t in used if k != last),
      "the rings before the cut are rows")
equal(scalar(db, "SELECT records_invalid FROM processes"), 1, "the cut ring counts once")
equal(p2pguard_lines(recover(db).stderr), [], "a second recover leaves it alone, silently")

# Truncated to less than its header, or to nothing: kept aside too, never deleted in silence.
for size, what in ((100, "shorter than its header"), (0, "empty")):
    db, path = fresh_copy(original)
    os.truncate(path, size)
    proc = recover(db)
    equal(proc.returncode, 0, "recover of a spool cut to %d bytes exits 0" % size)
    check(what in proc.stderr and os.path.exists(path + ".damaged"),
          "cut to %d bytes: said (%s) and kept as .damaged" % (size, proc.stderr.strip()))

# 2,000 random bytes changed across the rings (#25: rows with bytes = -9.08e18 and device -30976
# came out of such a file): every record that changed fails its checksum; no impossible row.
db, path = fresh_copy(original)
rnd = random.Random(2000)
with open(path, "r+b") as f:
    for _ in range(2000):
        k, head, tail = rnd.choice(used)
        f.seek(record_offset(k, rnd.randrange(tail, head)) + rnd.randrange(RECORD))
        f.write(bytes([rnd.randrange(256)]))
proc = recover(db)
equal(proc.returncode, 0, "recover of a spool with 2,000 random bytes changed exits 0")
equal(len(p2pguard_lines(proc.stderr)), 1, "one line: %s" % p2pguard_lines(proc.stderr))
invalid = scalar(db, "SELECT records_invalid FROM processes")
rows = scalar(db, "SELECT count(*) FROM transfers")
check(invalid > 0 and rows + invalid == intact, "every record is a row or counted invalid (%d + %d == %d)" % (rows, invalid, intact))
equal(scalar(db, "SELECT count(*) FROM transfers WHERE bytes < 0 OR bytes > 1 << 40 "
                 "OR src_device NOT IN (0, 1) OR dst_device NOT IN (0, 1) OR host_ns < 0 OR started_ns < 0"),
      0, "no imported row holds an impossible value")

# A changed record whose every value is still possible (its size): its checksum refuses it.
db, path = fresh_copy(original)
with open(path, "r+b") as f:
    f.seek(record_offset(ring, tail) + 16)  # bytes
    f.write(struct.pack("<Q", 12345))
proc = recover(db)
equal(scalar(db, "SELECT count(*) FROM transfers WHERE bytes = 12345"), 0, "a plausible but changed size is refused by the checksum")
equal(scalar(db, "SELECT records_invalid FROM processes"), 1, "and counted")

# A record rewritten with its checksum but an impossible value (a device past the process's two):
# refused by the value check, counted.
db, path = fresh_copy(original)
with open(path, "r+b") as f:
    f.seek(record_offset(ring, tail))
    rec = bytearray(f.read(RECORD))
    struct.pack_into("<h", rec, 44, 7)  # src_device
    crc = 0xffffffff  # CRC32C, bit by bit
    for byte in rec:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    crc ^= 0xffffffff
    f.seek(record_offset(ring, tail))
    f.write(rec)
    f.seek(ring_offset(ring) + 64 + 65536 * RECORD + (tail % 65536) * 4)
    f.write(struct.pack("<I", crc ^ (tail & 0xffffffff)))
proc = recover(db)
equal(scalar(db, "SELECT count(*) FROM transfers WHERE src_device = 7"), 0,
      "a successful copy from device 7 of a two-device process is refused whatever its checksum")
equal(scalar(db, "SELECT records_invalid FROM processes"), 1, "and counted")

# A starting guard finds the bit-flipped spool: the program's output and status are a bare run's.
db, path = fresh_copy(original)
with open(path, "r+b") as f:
    f.seek(record_offset(ring, tail) + 38)
    f.write(b"\x41")
bare = run([program("rt_peer"), "basic"], preload=False)
guarded = run([program("rt_peer"), "basic"], db=db)
equal(guarded.stdout, bare.stdout, "the guarded program's output is a bare run's")
equal(guarded.returncode, bare.returncode, "and so is its status")
lines = p2pguard_lines(guarded.stderr)
equal(len(lines), 1, "the guard says one line about the damaged spool: %s" % lines)
equal(scalar(db, "SELECT records_invalid FROM processes WHERE recovered=1"), 1, "counted in the recovered process's row")
equal(scalar(db, "SELECT count(*) FROM transfers WHERE process_id IN (SELECT id FROM processes WHERE recovered=1)"),
      intact - 1, "the dead process's intact records imported by the starting guard")
done()
