"""A file-size limit (`ulimit -f`) and a database that cannot be used: the spool is sized to what the
process uses and grows as its threads appear, never past RLIMIT_FSIZE, so the kernel never sends
SIGXFSZ. The program's output and exit status stay a bare run's; what cannot be kept costs one line
and is counted as dropped."""
import glob
import os
import resource
from harness import *


def limited(limit_bytes, args, db, **extra):
    """args under the guard with RLIMIT_FSIZE at limit_bytes (as `ulimit -f` sets it)."""
    def child():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, resource.RLIM_INFINITY))
    return subprocess.run(args, env=environment(db, **extra), capture_output=True, text=True,
                          timeout=120, preexec_fn=child)


def lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("p2pguard:")]


bare = run([program("rt_peer"), "basic"], preload=False)
want = expectations(bare.stdout)["transfers"]

# `ulimit -f 102400` (100 MiB): room for what the process records; the spool fits, every copy is a row.
db = tempdb()
proc = limited(100 << 20, [program("rt_peer"), "basic"], db)
equal(proc.returncode, bare.returncode, "ulimit -f 100 MiB: the exit status is a bare run's (not SIGXFSZ)")
equal(proc.stdout, bare.stdout, "ulimit -f 100 MiB: the output is a bare run's")
equal(lines(proc.stderr), [], "ulimit -f 100 MiB: nothing said")
equal(scalar(db, "SELECT count(*) FROM transfers"), want, "ulimit -f 100 MiB: every copy is a row")
equal(glob.glob(db + ".spool/*"), [], "ulimit -f 100 MiB: no spool file left behind, not even a half-made one")

# 2 MiB: the spool's header and first failure slots fit, a thread's ring (4.3 MiB) does not. The
# calls are counted as dropped, one line says why, the program runs on.
db = tempdb()
proc = limited(2 << 20, [program("rt_peer"), "basic"], db)
equal(proc.returncode, bare.returncode, "ulimit -f 2 MiB: the exit status is a bare run's")
equal(proc.stdout, bare.stdout, "ulimit -f 2 MiB: the output is a bare run's")
said = lines(proc.stderr)
equal(len(said), 1, "ulimit -f 2 MiB: one line (%s)" % said)
check(said and "file size limit" in said[0], "ulimit -f 2 MiB: the line names the file size limit")
equal(scalar(db, "SELECT count(*) FROM processes"), 1, "ulimit -f 2 MiB: the process has its row")
check(scalar(db, "SELECT records_dropped FROM processes") >= want,
      "ulimit -f 2 MiB: the copies not kept are counted as dropped")

# 64 KiB: not even the spool's header and first slots: one line, nothing recorded, the program runs on.
db = tempdb()
proc = limited(64 << 10, [program("rt_peer"), "basic"], db)
equal(proc.returncode, bare.returncode, "ulimit -f 64 KiB: the exit status is a bare run's")
equal(proc.stdout, bare.stdout, "ulimit -f 64 KiB: the output is a bare run's")
said = lines(proc.stderr)
equal(len(said), 1, "ulimit -f 64 KiB: one line (%s)" % said)
check(said and "file size limit" in said[0], "ulimit -f 64 KiB: the line names the file size limit")
equal([f for f in glob.glob(db + ".spool/*") if f.endswith(".new")], [], "ulimit -f 64 KiB: no half-made spool left")

# Threads appear under a limit: the first rings fit, a later thread's does not; the program's
# threads all finish, the rows of those with a ring are there, the others counted as dropped.
db = tempdb()
threads = expectations(run([program("rt_peer"), "threads", "4", "50"], preload=False).stdout)
proc = limited(12 << 20, [program("rt_peer"), "threads", "4", "50"], db)
equal(proc.returncode, 0, "ulimit -f 12 MiB, threads: the program exits 0")
check(len(lines(proc.stderr)) <= 1, "ulimit -f 12 MiB, threads: at most one line (%s)" % lines(proc.stderr))
rows = scalar(db, "SELECT count(*) FROM transfers")
dropped = scalar(db, "SELECT records_dropped FROM processes")
check(rows > 0, "ulimit -f 12 MiB, threads: the threads that got a ring have rows (%d)" % rows)
check(rows + dropped >= threads.get("transfers", 0),
      "ulimit -f 12 MiB, threads: every copy is a row or counted as dropped (%d + %d >= %s)"
      % (rows, dropped, threads.get("transfers")))

# A database that cannot be used (a folder in its place): the spool left for recovery holds what the
# process used, not 128 rings: its apparent size and its blocks are a few MiB for one thread.
db = tempdb()
os.mkdir(db)
proc = run([program("rt_peer"), "basic"], db=db)
files = glob.glob(db + ".spool/*.spool6")
equal(len(files), 1, "unusable database: the spool is kept for recovery")
if files:
    st = os.stat(files[0])
    check(st.st_size <= 16 << 20, "unusable database: the spool's size is %.1f MiB (<= 16)" % (st.st_size / 2**20))
    check(st.st_blocks * 512 <= 1 << 20,
          "unusable database: the spool holds %.2f MiB of disk (<= 1)" % (st.st_blocks * 512 / 2**20))

# Four threads with a few copies each: each ring's slots get their disk blocks as they fill, so the
# file left behind holds about what was recorded (a ring was 4.3 MiB of disk from its first record,
# 18 MB for this program), and every record is there for `recover`.
db = tempdb()
os.mkdir(db)
want = expectations(run([program("rt_peer"), "threads", "4", "10"], preload=False).stdout)["transfers"]
proc = run([program("rt_peer"), "threads", "4", "10"], db=db)
files = glob.glob(db + ".spool/*.spool6")
equal(len(files), 1, "unusable database, 4 threads: the spool is kept for recovery")
if files:
    st = os.stat(files[0])
    check(st.st_blocks * 512 <= 2 << 20,
          "unusable database, 4 threads: the spool holds %.2f MiB of disk (<= 2)" % (st.st_blocks * 512 / 2**20))
    os.rmdir(db)
    run([CLI, "recover", db], preload=False)
    equal(scalar(db, "SELECT count(*) FROM transfers"), want, "4 threads: every copy is a row after recover")

# A thread that records past its ring's first slots: they get their blocks as the thread reaches
# them, and every record is imported.
db = tempdb()
os.mkdir(db)
want = expectations(run([program("rt_peer"), "threads", "1", "30000"], preload=False).stdout)["transfers"]
proc = run([program("rt_peer"), "threads", "1", "30000"], db=db)
files = glob.glob(db + ".spool/*.spool6")
if files:
    st = os.stat(files[0])
    check(st.st_blocks * 512 < 4 << 20,
          "30,000 records: the ring's slots past them have no blocks (%.2f MiB)" % (st.st_blocks * 512 / 2**20))
os.rmdir(db)
run([CLI, "recover", db], preload=False)
equal(scalar(db, "SELECT count(*) FROM transfers"), want, "30,000 records: every one is a row after recover")
done()
