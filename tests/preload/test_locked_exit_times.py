"""GPU times survive a database that another rank keeps locked through the exit. The last copies'
records then stay in the spool for `p2pguard recover`, and their timing events die with the
contexts right after the exit's last pass with CUDA: that pass writes each copy's GPU time into its
record in the spool, so that the rows `recover` makes later have them. Both ways the lock can fall:
before the guard could open the database at all, and after it opened it (its process row written)
but before the copies."""
import os
import signal
import sqlite3
import time

from harness import *

EXIT_COPIES = program("exit_copies")
TIMES = "SELECT count(*), count(gpu_ns), count(CASE WHEN gpu_ns > 0 THEN 1 END) FROM transfers"


def schema_only():
    db = tempdb()
    run([EXIT_COPIES, "peer", "0"], db=db)  # the database exists, with its schema and no copy
    return db


def holding(db):
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def release_and_recover(db, holder):
    holder.execute("ROLLBACK")
    holder.close()
    run([CLI, "recover", db], preload=False)


for timing in ("all", "sampled"):
    # Locked before the program starts: the guard never opens the database.
    db = schema_only()
    holder = holding(db)
    proc = run([EXIT_COPIES, "peer", "50"], db=db, P2PGUARD_GPU_TIMING=timing,
               P2PGUARD_TEST="exit-report")
    equal(query(db, "SELECT count(*) FROM transfers")[0][0], 0,
          "%s, locked from the start: no row while the lock is held" % timing)
    release_and_recover(db, holder)
    equal(query(db, TIMES)[0], (50, 50, 50),
          "%s, locked from the start: after recover 50 rows, 50 of 50 with their GPU time (%s)"
          % (timing, proc.stderr.strip()))
    check("times into the spool 50," in proc.stderr,
          "%s: the exit pass wrote 50 times into the spool (%s)" % (timing, proc.stderr.strip()))

    # Locked after the guard opened the database, before the copies: the exit pass cannot write
    # the rows, the records wait in the spool with their times.
    db = schema_only()
    proc = subprocess.Popen([EXIT_COPIES, "peer", "50"],
                            env=environment(db, P2PGUARD_GPU_TIMING=timing,
                                            P2PGUARD_TEST="exit-report", EXIT_COPIES_PAUSE="1"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    equal(proc.stdout.readline().strip(), "READY", "%s: the program initialised CUDA" % timing)
    deadline = time.monotonic() + 30
    while scalar(db, "SELECT count(*) FROM processes WHERE pid = ?", proc.pid) == 0:
        check(time.monotonic() < deadline, "%s: the guard wrote its process row" % timing)
        time.sleep(0.02)
    holder = holding(db)
    out, err = proc.communicate("go\n", timeout=60)
    equal(proc.returncode, 0, "%s, locked after the open: the program exits 0 (%s)" % (timing, err.strip()))
    equal(query(db, "SELECT count(*) FROM transfers")[0][0], 0,
          "%s, locked after the open: no row while the lock is held" % timing)
    release_and_recover(db, holder)
    equal(query(db, TIMES)[0], (50, 50, 50),
          "%s, locked after the open: after recover 50 rows, 50 of 50 with their GPU time (%s)"
          % (timing, err.strip()))
    equal(scalar(db, "SELECT count(*) FROM processes WHERE recovered = 1"), 0,
          "%s: the process that ended by exit() is not marked recovered" % timing)

# A crash (SIGSEGV right after the synchronise) with the database locked after the guard opened
# it: the crash row and the copies wait in the spool, the copies with their GPU times.
db = schema_only()
proc = subprocess.Popen([EXIT_COPIES, "crash", "50"],
                        env=environment(db, P2PGUARD_GPU_TIMING="all", EXIT_COPIES_PAUSE="1"),
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
equal(proc.stdout.readline().strip(), "READY", "crash: the program initialised CUDA")
deadline = time.monotonic() + 30
while scalar(db, "SELECT count(*) FROM processes WHERE pid = ?", proc.pid) == 0:
    check(time.monotonic() < deadline, "crash: the guard wrote its process row")
    time.sleep(0.02)
holder = holding(db)
out, err = proc.communicate("go\n", timeout=60)
equal(proc.returncode, -signal.SIGSEGV, "crash, locked: the program died of its SIGSEGV")
release_and_recover(db, holder)
equal(scalar(db, "SELECT count(*) FROM crashes"), 1, "crash, locked: the crash row after recover")
equal(query(db, TIMES)[0], (50, 50, 50),
      "crash, locked: after recover 50 rows, 50 of 50 with their GPU time (%s)" % err.strip()[-300:])

# Locked after the rows were written, while their copies still run (20 x 1 MiB at 100 ns a byte:
# about 2 s): the times are read at the exit, but their rows cannot take them; they go into the
# spool and `recover` writes them into those rows.
for timing in ("all", "cupti"):
    db = schema_only()
    proc = subprocess.Popen([EXIT_COPIES, "peer", "20"],
                            env=environment(db, P2PGUARD_GPU_TIMING=timing, P2PGUARD_TEST="exit-report",
                                            EXIT_COPIES_PAUSE="after", SIMCUDA_COPY_NS_PER_BYTE="100"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    equal(proc.stdout.readline().strip(), "READY", "%s: the copies are enqueued" % timing)
    deadline = time.monotonic() + 30
    while scalar(db, "SELECT count(*) FROM transfers") < 20:
        check(time.monotonic() < deadline, "%s: the guard wrote the 20 rows" % timing)
        time.sleep(0.01)
    holder = holding(db)
    timed_before = scalar(db, "SELECT count(gpu_ns) FROM transfers")
    out, err = proc.communicate("go\n", timeout=60)
    equal(proc.returncode, 0, "%s, rows written, then locked: the program exits 0" % timing)
    release_and_recover(db, holder)
    equal(query(db, TIMES)[0], (20, 20, 20),
          "%s, rows written, then locked: after recover 20 of 20 rows with their GPU time "
          "(%d before the lock; %s)" % (timing, timed_before, err.strip()))
    rows = query(db, "SELECT min(gpu_ns), max(gpu_ns) FROM transfers")[0]
    check(rows[0] >= 100 * (1 << 20) * 0.9,
          "%s: each is a copy's own time, about 105 ms (%s)" % (timing, rows))

# A database the guard cannot use at all (a folder in its place): no drainer runs, and the
# exit's handler itself writes the times into the spool.
db = tempdb()
os.mkdir(db)
proc = run([EXIT_COPIES, "peer", "50"], db=db, P2PGUARD_GPU_TIMING="all", P2PGUARD_TEST="exit-report")
check("times into the spool 50," in proc.stderr,
      "a folder in place of the database: 50 times into the spool at exit (%s)" % proc.stderr.strip())
os.rmdir(db)
run([CLI, "recover", db], preload=False)
equal(query(db, TIMES)[0], (50, 50, 50),
      "a folder in place of the database, removed: after recover 50 of 50 with their GPU time")

# Unlocked, nothing changes: the rows are written by the process itself, every one timed.
db = tempdb()
proc = run([EXIT_COPIES, "peer", "50"], db=db, P2PGUARD_GPU_TIMING="all", P2PGUARD_TEST="exit-report")
equal(query(db, TIMES)[0], (50, 50, 50), "unlocked: 50 of 50 with their GPU time")
done()
