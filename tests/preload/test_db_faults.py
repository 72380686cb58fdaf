"""Database faults while a guarded program runs: read-only, disk full, deleted, locked by another
connection for 30 s, a database of another schema, a folder or a FIFO in its place. The program's
output and exit status are a bare run's, the loss is at most one stderr line, and once the fault
clears every spooled record reaches the database (a later `p2pguard recover`, or the same process
when the fault clears while it runs)."""
import os
import pwd
import shutil
import sqlite3
import stat
import tempfile
import threading
import time
from harness import *

LOCK_SECONDS = int(os.environ.get("P2PG_LOCK_SECONDS", "30"))


def lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("p2pguard:")]


bare = run([program("rt_peer"), "basic"], preload=False)
want = int(expectations(bare.stdout)["transfers"])


def same_as_bare(proc, what, reference=bare):
    equal(proc.stdout, reference.stdout, what + ": the program's output is a bare run's")
    equal(proc.returncode, reference.returncode, what + ": and so is its status")


def recover(db, as_user=None):
    cmd = (as_user or []) + [CLI, "recover", db]
    return subprocess.run(cmd, capture_output=True, text=True, env=environment(preload=False), timeout=60)


# A database of another schema (a "processes" table of someone else's).
db = tempdb()
with sqlite3.connect(db) as c:
    c.execute("CREATE TABLE processes (name TEXT)")
    c.execute("INSERT INTO processes VALUES ('theirs')")
guarded = run([program("rt_peer"), "basic"], db=db)
same_as_bare(guarded, "another schema")
equal(len(lines(guarded.stderr)), 1, "another schema: one line (%s)" % lines(guarded.stderr))
equal(scalar(db, "SELECT name FROM processes"), "theirs", "their table is untouched")
os.rename(db, db + ".theirs")
for suffix in ("-wal", "-shm"):
    if os.path.exists(db + suffix):
        os.remove(db + suffix)
equal(recover(db).returncode, 0, "another schema moved away: recover exits 0")
equal(scalar(db, "SELECT count(*) FROM transfers"), want, "another schema: every spooled copy is a row after recover")

# A folder, then a FIFO, where the database should be: no hang, one line, the spool keeps it all.
for kind in ("folder", "fifo"):
    db = tempdb()
    if kind == "folder":
        os.mkdir(db)
    else:
        os.mkfifo(db)
    guarded = run([program("rt_peer"), "basic"], db=db, timeout=60)
    same_as_bare(guarded, "a %s in place of the database" % kind)
    said = lines(guarded.stderr)
    equal(len(said), 1, "%s: one line (%s)" % (kind, said))
    check(said and "not a regular file" in said[0], "%s: the line says why" % kind)
    rec = recover(db)
    check(rec.returncode != 0 and len(lines(rec.stderr)) == 1, "%s: recover refuses it with one line, no hang" % kind)
    (os.rmdir if kind == "folder" else os.remove)(db)
    equal(recover(db).returncode, 0, "%s removed: recover exits 0" % kind)
    equal(scalar(db, "SELECT count(*) FROM transfers"), want, "%s: every spooled copy is a row after recover" % kind)

# Read-only: the program runs as a second user that may not write the database (root may write
# anything, so the user is the way to make it read-only), while its spool folder is its own.
if os.geteuid() == 0:
    other = pwd.getpwnam("nobody")
    as_other = ["setpriv", "--reuid=%d" % other.pw_uid, "--regid=%d" % other.pw_gid, "--clear-groups"]
    db = tempdb()
    folder = os.path.dirname(db)
    os.chmod(folder, 0o755)
    run([program("rt_peer"), "basic"], db=db)  # root's rows
    shutil.rmtree(db + ".spool", ignore_errors=True)
    os.mkdir(db + ".spool", 0o700)
    os.chown(db + ".spool", other.pw_uid, other.pw_gid)
    env = environment(db)
    proc = subprocess.run(as_other + [program("rt_peer"), "basic"], env=env, capture_output=True, text=True,
                          timeout=60)
    bare_other = subprocess.run(as_other + [program("rt_peer"), "basic"], env=environment(preload=False),
                                capture_output=True, text=True, timeout=60)
    same_as_bare(proc, "read-only database", bare_other)
    equal(len(lines(proc.stderr)), 1, "read-only: one line (%s)" % lines(proc.stderr))
    equal(scalar(db, "SELECT count(*) FROM transfers"), want, "read-only: the database is as it was")
    # The fault clears: the database becomes the other user's; its recover imports the spool.
    for name in os.listdir(folder):
        os.chown(os.path.join(folder, name), other.pw_uid, other.pw_gid)
    os.chown(folder, other.pw_uid, other.pw_gid)
    rec = recover(db, as_other)
    equal(rec.returncode, 0, "read-only cleared: recover exits 0 (%s)" % rec.stderr.strip())
    equal(scalar(db, "SELECT count(*) FROM transfers"), 2 * want, "read-only cleared: the spooled copies are rows")
else:
    print("# read-only case skipped: it needs root to run the program as a second user")

# Disk full: the database on a full tmpfs, its spool folder on a roomy one (mounted there). Three
# times what a first run leaves (the database, its rules table and its WAL; a checkpoint copies the
# WAL into the database beside it), so that once the filler is gone recover has room to move the
# spooled copies in.
full = tempfile.mkdtemp(prefix="p2pg-full-")
mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", tmpfs_size(3), "tmpfs", full], capture_output=True).returncode == 0
if mounted:
    roomy = os.path.join(full, "p2pguard.db.spool")
    try:
        os.mkdir(roomy, 0o700)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", roomy], check=True)
        db = os.path.join(full, "p2pguard.db")
        run([program("rt_peer"), "basic"], db=db)
        filler = os.path.join(full, "filler")
        subprocess.run(["dd", "if=/dev/zero", "of=" + filler, "bs=4k"], capture_output=True)
        guarded = run([program("rt_peer"), "basic"], db=db)
        same_as_bare(guarded, "disk full")
        said = lines(guarded.stderr)
        equal(len(said), 1, "disk full: one line (%s)" % said)
        os.remove(filler)
        rec = recover(db)
        equal(rec.returncode, 0, "disk freed: recover exits 0 (%s)" % rec.stderr.strip())
        equal(scalar(db, "SELECT count(*) FROM transfers"), 2 * want, "disk freed: the spooled copies are rows")
    finally:
        subprocess.run(["umount", roomy], capture_output=True)
        subprocess.run(["umount", full], capture_output=True)
else:
    print("# disk-full case skipped: mount -t tmpfs is not allowed here (needs root; CI runs as root)")

# Deleted while the program runs: the rows from then on go to the new file at the path.
db = tempdb()
copies = 40
proc = subprocess.Popen([program("rt_peer"), "spaced", str(copies), "50000"], env=environment(db),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
deadline = time.time() + 10
while time.time() < deadline:
    try:
        if scalar(db, "SELECT count(*) FROM transfers") > 0:
            break
    except sqlite3.Error:
        pass
    time.sleep(0.05)
old = sqlite3.connect(db)
before = old.execute("SELECT count(*) FROM transfers").fetchone()[0]
os.remove(db)
# The companions come and go with the connections (SQLite removes the -wal when the last one
# closes, and the drainer's may be between two passes): gone either way.
for suffix in ("-wal", "-shm"):
    if os.path.exists(db + suffix):
        os.remove(db + suffix)
out, err = proc.communicate(timeout=60)
bare_spaced = run([program("rt_peer"), "spaced", str(copies), "50000"], preload=False)
equal(out, bare_spaced.stdout, "deleted: the program's output is a bare run's")
equal(proc.returncode, 0, "deleted: the program's status is a bare run's")
equal(len(lines(err)), 1, "deleted: one line (%s)" % lines(err))
in_old = old.execute("SELECT count(*) FROM transfers").fetchone()[0]
in_new = scalar(db, "SELECT count(*) FROM transfers")
check(before > 0 and in_new > 0, "rows before the deletion (%d) and after it (%d)" % (in_old, in_new))
equal(in_old + in_new, copies, "deleted: the old file's rows and the new file's together are every copy")
old.close()

# Locked by another connection for LOCK_SECONDS while the program copies once a second: nothing
# said, nothing lost, the rows arrive in the same process once the lock is gone.
db = tempdb()
run([program("rt_peer"), "basic"], db=db)
holder = sqlite3.connect(db, timeout=10, isolation_level=None)
holder.execute("BEGIN IMMEDIATE")
holder.execute("UPDATE processes SET rank = rank")
spaced = [program("rt_peer"), "spaced", str(LOCK_SECONDS + 4), "1000000"]
proc = subprocess.Popen(spaced, env=environment(db), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
reference = subprocess.Popen(spaced, env=environment(preload=False), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
time.sleep(LOCK_SECONDS)
holder.execute("COMMIT")
holder.close()
out, err = proc.communicate(timeout=LOCK_SECONDS + 60)
ref_out, _ = reference.communicate(timeout=LOCK_SECONDS + 60)
equal(out, ref_out, "locked %d s: the program's output is a bare run's" % LOCK_SECONDS)
equal(proc.returncode, reference.returncode, "locked: and so is its status")
equal(lines(err), [], "locked: nothing lost, nothing said")
equal(scalar(db, "SELECT count(*) FROM transfers"), want + LOCK_SECONDS + 4,
      "locked: every copy is a row, written by the program itself once the lock was gone")
done()
