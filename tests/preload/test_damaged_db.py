"""Commands on a damaged or missing database (issue 22, Low): `report`, `trace` and `metrics` on a
database whose pages are garbage say so in one line and exit 2 (report blamed "database busy?",
trace and metrics wrote what they had read before the damage and exited 0); `recover` of a name with
neither a database nor a spool folder is one line and exit 2 (it said "recovered 0")."""
import os
import sqlite3
from harness import *


def lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("p2pguard")]


db = tempdb()
run([program("rt_peer"), "basic"], db=db)
run([program("rt_peer"), "threads", "2", "3000"], db=db)
with sqlite3.connect(db) as c:
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
holder = sqlite3.connect(db, isolation_level=None)
holder.execute("BEGIN IMMEDIATE")  # the crash's spool stays for the next reader
run([program("rt_peer"), "crash"], db=db, check=False)
holder.execute("ROLLBACK")
holder.close()
with open(db, "r+b") as f:
    f.seek(3 * 16384)
    f.write(bytes(range(256)) * 128)
proc = cli("report", db)
said = lines(proc.stderr)
equal(proc.returncode, 2, "report on a damaged database exits 2")
equal(len(said), 1, "one line (%s)" % said)
check(said and "malformed" in said[0] and "busy" not in said[0], "it says the database is damaged, not busy")

# The other readers stop at the row that fails too: what they read before it would pass for the
# whole. A database with no spool left to import, so that the damage is met by the reading itself.
db2 = tempdb()
run([program("rt_peer"), "basic"], db=db2)
run([program("rt_peer"), "threads", "2", "3000"], db=db2)
with sqlite3.connect(db2) as c:
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
with open(db2, "r+b") as f:
    f.seek(3 * 16384)
    f.write(bytes(range(256)) * 128)
trace_file = db2 + ".trace.json"
for args, what in ((["trace", db2, "-o", trace_file], "trace"), (["metrics", db2], "metrics")):
    proc = cli(*args)
    said = lines(proc.stderr)
    equal(proc.returncode, 2, "%s on a damaged database exits 2" % what)
    equal(len(said), 1, "%s: one line (%s)" % (what, said))
    check(said and "is damaged (database disk image is malformed)" in said[0],
          "%s says the database is damaged (%s)" % (what, said))
    equal(proc.stdout, "", "%s prints nothing as if it were the whole" % what)
check(not os.path.exists(trace_file), "no trace file is left from a damaged database")

proc = cli("recover", "/nonexistent/p2pguard.db")
equal(proc.returncode, 2, "recover of a name with no database and no spool folder exits 2")
check("no database at /nonexistent/p2pguard.db" in proc.stderr and len(lines(proc.stderr)) == 1,
      "one line says there is none (%s)" % proc.stderr.strip())
done()
