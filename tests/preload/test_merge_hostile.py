"""`merge` of a hostile input (issue 22, item 4): a column named to end a statement and start others
(DELETE FROM main.transfers; ATTACH a file; CREATE TABLE in it) wiped the output's rows and made a
file where the input chose, since names went into ALTER TABLE unquoted and the input's own CREATE
TABLE text was run. Now every name is quoted and nothing of the input's SQL runs: the output keeps
its rows, no file appears, the input's rows arrive."""
import os
import sqlite3
from harness import *

out = tempdb("out.db")
run([program("rt_peer"), "basic"], db=out)
kept = scalar(out, "SELECT count(*) FROM transfers")

folder = tempfolder()
planted = os.path.join(folder, "planted.db")
evil = tempdb("evil.db")
run([program("rt_peer"), "errors"], db=evil)
run([program("rt_peer"), "basic"], db=evil)
theirs = scalar(evil, "SELECT count(*) FROM transfers")
column = ('y" INTEGER; DELETE FROM main.transfers; ATTACH DATABASE \'%s\' AS pwn; '
          'CREATE TABLE pwn.owned(a); --' % planted)
with sqlite3.connect(evil) as c:
    c.execute('ALTER TABLE transfers ADD COLUMN "%s" INTEGER' % column.replace('"', '""'))

# The reviewer's input: that column alone.
proc = cli("merge", out, evil)
equal(proc.returncode, 0, "merge of the hostile column exits 0 (%s)" % proc.stderr.strip())
check(not os.path.exists(planted), "no file appears where the column's text chose")
equal(scalar(out, "SELECT count(*) FROM transfers"), kept + theirs, "the output keeps its rows and gets the input's")

# More: a table named to end a statement, a table whose text would run code, a view, a trigger.
with sqlite3.connect(evil) as c:
    c.execute('CREATE TABLE "t""; DROP TABLE main.processes; --" (process_id INTEGER, a TEXT)')
    c.execute('INSERT INTO "t""; DROP TABLE main.processes; --" VALUES (1, \'x\')')
    # A table whose own CREATE text would run a function and attach a file, were it run.
    c.execute("CREATE TABLE extra (process_id INTEGER, b TEXT DEFAULT (hex(randomblob(8))), "
              "UNIQUE (process_id, b))")
    c.execute("INSERT INTO extra (process_id, b) VALUES (1, 'one')")
    c.execute("CREATE VIEW v AS SELECT 1")
    c.execute("CREATE TRIGGER tr AFTER INSERT ON transfers BEGIN DELETE FROM processes; END")

out = tempdb("out2.db")
run([program("rt_peer"), "basic"], db=out)
proc = cli("merge", out, evil)
equal(proc.returncode, 0, "merge of a hostile input exits 0 (%s)" % proc.stderr.strip())
check(not os.path.exists(planted), "no file appears where the input's text chose")
equal(scalar(out, "SELECT count(*) FROM transfers"), kept + theirs, "the output keeps its rows and gets the input's")
equal(scalar(out, "SELECT count(*) FROM processes"), 3, "every process is there")
equal(scalar(out, "SELECT count(*) FROM pragma_table_info('transfers') WHERE name = ?", column), 1,
      "the input's column arrives under its own name, quoted")
equal(scalar(out, 'SELECT a FROM "t""; DROP TABLE main.processes; --"'), "x", "the oddly named table arrives too")
equal(scalar(out, "SELECT type FROM pragma_table_info('extra') WHERE name = 'b'"), "TEXT",
      "a new table is made with the input's column affinities, not its text")
equal(scalar(out, "SELECT count(*) FROM sqlite_master WHERE type IN ('view', 'trigger') AND name IN ('v', 'tr')"), 0,
      "no view or trigger of the input's comes along")
again = cli("merge", out, evil)
equal(scalar(out, "SELECT count(*) FROM extra"), 1, "merging again adds nothing to a new table with a unique key")
equal(scalar(out, "SELECT count(*) FROM transfers"), kept + theirs, "nor to the rows")
done()
