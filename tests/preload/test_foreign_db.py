"""A database that is not ours, or is a newer p2pguard's (issue 22, item 7): refused with one line and
left exactly as it was (another application's had its user_version, journal mode and tables
changed; a newer schema was downgraded). An empty database is ours to fill; a 0.1 database (schema
1) is migrated to schema 2 (PRAGMA user_version = 2)."""
import hashlib
import os
import sqlite3
from harness import *


def lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("p2pguard:")]


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def pragma(db, name):
    return scalar(db, "PRAGMA " + name)


bare = run([program("rt_peer"), "basic"], preload=False)
want = expectations(bare.stdout)["transfers"]

# Another application's database (user_version 42, rollback journal, its own tables).
db = tempdb("app.db")
with sqlite3.connect(db) as c:
    c.execute("PRAGMA user_version = 42")
    c.execute("CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT)")
    c.execute("INSERT INTO things (name) VALUES ('theirs')")
before = digest(db)
proc = run([program("rt_peer"), "basic"], db=db)
equal(proc.stdout, bare.stdout, "another application's database: the program's output is a bare run's")
said = lines(proc.stderr)
equal(len(said), 1, "another application's database: one line (%s)" % said)
check(said and "not a p2pguard database" in said[0], "the line says it is not ours")
equal(digest(db), before, "another application's database: not a byte changed")
equal(pragma(db, "journal_mode"), "delete", "its journal mode is its own")
equal(scalar(db, "SELECT count(*) FROM sqlite_master"), 1, "no table added")
rec = cli("recover", db)
check(rec.returncode != 0 and "not a p2pguard database" in rec.stderr, "recover refuses it too (%s)" % rec.stderr.strip())
equal(digest(db), before, "and changes nothing")

# A newer p2pguard's database: refused, not downgraded.
db = tempdb()
run([program("rt_peer"), "basic"], db=db)
with sqlite3.connect(db) as c:
    c.execute("PRAGMA user_version = 3")
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
before = digest(db)
proc = run([program("rt_peer"), "basic"], db=db)
said = lines(proc.stderr)
equal(proc.stdout, bare.stdout, "newer schema: the program's output is a bare run's")
equal(len(said), 1, "newer schema: one line (%s)" % said)
check(said and "newer" in said[0] and "3" in said[0], "the line says it is a newer schema")
equal(pragma(db, "user_version"), 3, "newer schema: not downgraded")
equal(digest(db), before, "newer schema: not a byte changed")
rep = cli("report", db)
check(rep.returncode == 0 and "transfers" in rep.stdout.lower(), "report still reads it (%d)" % rep.returncode)

# An empty database (no table, whatever its user_version): ours to fill.
db = tempdb()
with sqlite3.connect(db) as c:
    c.execute("PRAGMA user_version = 42")
proc = run([program("rt_peer"), "basic"], db=db)
equal(lines(proc.stderr), [], "empty database: nothing said")
equal(scalar(db, "SELECT count(*) FROM transfers"), want, "empty database: every copy is a row")
equal(pragma(db, "user_version"), 2, "empty database: schema 2")

# A 0.1 database (schema 1, without the columns added since): migrated to 2, its rows kept.
db = tempdb()
with sqlite3.connect(db) as c:
    c.executescript("""
        PRAGMA user_version = 1;
        CREATE TABLE processes (id INTEGER PRIMARY KEY, pid INTEGER NOT NULL, hostname TEXT, rank INTEGER,
          local_rank INTEGER, cmdline TEXT, started_ns INTEGER NOT NULL, mode TEXT, guard_version TEXT,
          driver_version INTEGER, boot_id TEXT NOT NULL, records_dropped INTEGER NOT NULL DEFAULT 0,
          recovered INTEGER NOT NULL DEFAULT 0, UNIQUE (boot_id, pid, started_ns));
        CREATE TABLE crashes (id INTEGER PRIMARY KEY, process_id INTEGER NOT NULL, thread_id INTEGER,
          signal INTEGER, backtrace TEXT, started_ns INTEGER, UNIQUE (process_id, thread_id, started_ns));
        INSERT INTO processes (pid, started_ns, boot_id) VALUES (1, 1, 'old');
    """)
proc = run([program("rt_peer"), "basic"], db=db)
equal(lines(proc.stderr), [], "schema 1: nothing said")
equal(pragma(db, "user_version"), 2, "schema 1: migrated to 2")
equal(scalar(db, "SELECT count(*) FROM pragma_table_info('processes') WHERE name = 'records_invalid'"), 1,
      "schema 1: processes.records_invalid added")
equal(scalar(db, "SELECT count(*) FROM pragma_table_info('crashes') WHERE name = 'python_stack'"), 1,
      "schema 1: crashes.python_stack added")
equal(scalar(db, "SELECT count(*) FROM processes WHERE boot_id = 'old'"), 1, "schema 1: its rows kept")
equal(scalar(db, "SELECT count(*) FROM transfers"), want, "schema 1: the new rows are there")

# A database whose processes table lacks what report reads (hand-made, or cut by a tool): report
# says what it cannot read, in one line, and exits 2.
db = tempdb("cut.db")
with sqlite3.connect(db) as c:
    c.executescript("""
        PRAGMA application_id = 1345474631; PRAGMA user_version = 2;
        CREATE TABLE processes (id INTEGER PRIMARY KEY, pid INTEGER);
        CREATE TABLE transfers (id INTEGER PRIMARY KEY);
    """)
rep = cli("report", db)
check(rep.returncode == 2 and lines(rep.stderr) == ["p2pguard: cannot read the processes: no such column: hostname"],
      "a processes table without its columns: report says so in one line (%d, %s)" % (rep.returncode, rep.stderr.strip()))

# merge into another application's database: refused, unchanged.
out = tempdb("theirs.db")
with sqlite3.connect(out) as c:
    c.execute("CREATE TABLE things (a)")
before = digest(out)
m = cli("merge", out, db)
check(m.returncode == 2 and "not a p2pguard database" in m.stderr, "merge into another application's database is refused (%s)" % m.stderr.strip())
equal(digest(out), before, "and it is unchanged")
done()
