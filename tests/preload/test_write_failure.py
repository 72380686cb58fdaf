"""A database whose writes start failing while the program runs (the disk fills up): the one line
says why, as SQLite said it when the write failed (issue 22, Low: it read "cannot rollback - no
transaction is active" or "not an error", the message of the rollback that followed), and the
records stay in the spool. Needs root for the small tmpfs; CI runs as root."""
import os
import subprocess
import tempfile
import time
from harness import *


def lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("p2pguard:")]


# Room for the database the program creates (the knowledge base in it included) and a little more:
# the filler then takes the rest, while the drainer is writing rows.
full = tempfile.mkdtemp(prefix="p2pg-fill-")
if subprocess.run(["mount", "-t", "tmpfs", "-o", tmpfs_size(2), "tmpfs", full], capture_output=True).returncode != 0:
    print("1..0 # SKIP mount -t tmpfs is not allowed here (needs root; CI runs as root)")
    raise SystemExit(77)
roomy = os.path.join(full, "p2pguard.db.spool")
try:
    os.mkdir(roomy, 0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", roomy], check=True)
    db = os.path.join(full, "p2pguard.db")
    copies = 60
    proc = subprocess.Popen([program("rt_peer"), "spaced", str(copies), "50000"], env=environment(db),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (os.path.exists(db) and scalar(db, "SELECT count(*) FROM sqlite_master")):
        time.sleep(0.05)
    time.sleep(0.3)  # the drainer is writing rows
    subprocess.run(["dd", "if=/dev/zero", "of=" + os.path.join(full, "filler"), "bs=4k"], capture_output=True)
    out, err = proc.communicate(timeout=120)
    equal(proc.returncode, 0, "disk filled while running: the program exits 0")
    said = lines(err)
    equal(len(said), 1, "one line (%s)" % said)
    check(said and "writing to" in said[0] and ("full" in said[0] or "disk I/O" in said[0]) and
          "not an error" not in said[0] and "cannot rollback" not in said[0],
          "it says why the write failed, not what the rollback said")
    os.remove(os.path.join(full, "filler"))
    rec = subprocess.run([CLI, "recover", db], capture_output=True, text=True, env=environment(preload=False))
    equal(rec.returncode, 0, "disk freed: recover exits 0 (%s)" % rec.stderr.strip())
    equal(scalar(db, "SELECT count(*) FROM transfers"), copies, "disk freed: every copy is a row")
finally:
    subprocess.run(["umount", roomy], capture_output=True)
    subprocess.run(["umount", full], capture_output=True)

# A spool whose disk fills while a ring's slots get their blocks (a 1 MiB tmpfs: the file, its
# first ring and one growth fit, the next growth does not): the thread goes on with a shorter
# ring, its copies folded into the overflow aggregates, never a store into a hole (SIGBUS), and
# every copy is counted once.
room = tempfile.mkdtemp(prefix="p2pg-ring-")
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", room], check=True)
try:
    db = os.path.join(room, "p2pguard.db")
    os.mkdir(db)  # unusable: everything stays in the spool
    spool_dir = db + ".spool"
    os.mkdir(spool_dir, 0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", spool_dir], check=True)
    copies = 30000
    proc = run([program("rt_peer"), "threads", "1", str(copies)], db=db, check=False)
    equal(proc.returncode, 0, "spool disk full mid-ring: the program exits 0")
    check(len(lines(proc.stderr)) <= 2, "spool disk full mid-ring: at most two lines (%s)" % lines(proc.stderr))
    os.rmdir(db)
    rec = subprocess.run([CLI, "recover", db], capture_output=True, text=True, env=environment(preload=False))
    equal(rec.returncode, 0, "spool disk full mid-ring: recover exits 0 (%s)" % rec.stderr.strip())
    rows = scalar(db, "SELECT count(*) FROM transfers")
    folded = scalar(db, "SELECT coalesce(sum(count), 0) FROM transfer_overflow")
    dropped = scalar(db, "SELECT records_dropped FROM processes")
    check(rows < copies and folded > 0, "the ring was shorter: %d rows, %d folded" % (rows, folded))
    equal(rows + folded + dropped, copies, "every copy counted once (%d rows + %d folded + %d dropped)"
          % (rows, folded, dropped))
finally:
    subprocess.run(["umount", spool_dir], capture_output=True)
    subprocess.run(["umount", room], capture_output=True)
done()
