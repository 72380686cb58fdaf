"""A spool file that a crash, a disk or a person damaged: `p2pguard recover` and a starting guard
import what is intact, skip the damage with one line and count it in processes.records_invalid,
never crash, never turn garbage into rows, and the guarded program's output stays its own."""
import glob
import os
import shutil
import sqlite3
import struct
import time
from harness import *

HEADER, RING_BYTES, RECORD = 4096, 64 + 65536 * 64 + 256 * 40, 64  # struct p2pg_spool_thread: ring, then aggregates


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
    files = glob.glob(db + ".spool/*.spool4")
    equal(len(files), 1, "a SIGKILLed process leaves its spool")
    return files[0]


def rings(path):
    """(ring, head, tail) of each used ring."""
    used = []
    with open(path, "rb") as f:
        for k in range(128):
            f.seek(HEADER + k * RING_BYTES)
            head, tail = struct.unpack("<QQ", f.read(16))
            if head:
                used.append((k, head, tail))
    return used


def record_offset(ring, seq):
    return HEADER + ring * RING_BYTES + 64 + (seq % 65536) * RECORD


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
    f.seek(HEADER + ring * RING_BYTES + 8)
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

# Truncated to half (a full disk while the file was copied): refused without a SIGBUS.
db, path = fresh_copy(original)
os.truncate(path, os.path.getsize(path) // 2)
proc = recover(db)
equal(proc.returncode, 0, "recover of a truncated spool exits 0")
equal(scalar(db, "SELECT count(*) FROM transfers"), 0, "nothing of it imported")

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
