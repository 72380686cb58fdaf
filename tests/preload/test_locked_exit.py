"""Exit while another connection holds the database (issue 22, Low): the program's exit is not
delayed by the guard's retries, its records wait in the spool, and once imported its process is not
marked `recovered` (it ended cleanly). Sixteen processes ending at once on one database: none is
marked `recovered`."""
import sqlite3
import time
from harness import *


def timed(args, **kw):
    t0 = time.monotonic()
    proc = run(args, **kw)
    return proc, time.monotonic() - t0


bare, bare_s = timed([program("rt_peer"), "basic"], preload=False)
want = expectations(bare.stdout)["transfers"]

db = tempdb()
run([program("rt_peer"), "basic"], db=db)  # the database exists, with its schema
# The yardstick is the same guarded run on a free database: under a sanitizer the guard's own start
# and exit take longer than a bare run by themselves, and what is under test is the lock's share.
free, free_s = timed([program("rt_peer"), "basic"], db=db)
holder = sqlite3.connect(db, isolation_level=None)
holder.execute("BEGIN IMMEDIATE")
guarded, guarded_s = timed([program("rt_peer"), "basic"], db=db)
holder.execute("ROLLBACK")
holder.close()
equal(guarded.stdout, bare.stdout, "locked: the output is a bare run's")
check(guarded_s - free_s < 0.6, "locked: the exit is not held up (%.2f s against %.2f s on a free "
      "database, %.2f s bare)" % (guarded_s, free_s, bare_s))
rec = run([CLI, "recover", db], preload=False)
equal(scalar(db, "SELECT count(*) FROM transfers"), 3 * want, "locked: every copy is a row after recover")
equal(scalar(db, "SELECT count(*) FROM processes WHERE recovered = 1"), 0,
      "locked: the process that ended cleanly is not marked recovered")

db = tempdb()
procs = [subprocess.Popen([program("rt_peer"), "threads", "4", "2000"], env=environment(db),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(16)]
for p in procs:
    p.communicate(timeout=120)
run([CLI, "recover", db], preload=False)
equal(scalar(db, "SELECT count(*) FROM processes"), 16, "16 at once: 16 processes")
equal(scalar(db, "SELECT count(*) FROM processes WHERE recovered = 1"), 0, "16 at once: none marked recovered")
equal(scalar(db, "SELECT count(*) FROM transfers"), 16 * 4 * 2000, "16 at once: every copy is a row")
done()
