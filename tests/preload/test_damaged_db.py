"""Commands on a damaged or missing database (issue 22, Low): `report` on a database whose pages
are garbage says so in one line and exits 2 (it blamed "database busy?"); `recover` of a name with
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

proc = cli("recover", "/nonexistent/p2pguard.db")
equal(proc.returncode, 2, "recover of a name with no database and no spool folder exits 2")
check("no database at /nonexistent/p2pguard.db" in proc.stderr and len(lines(proc.stderr)) == 1,
      "one line says there is none (%s)" % proc.stderr.strip())
done()
