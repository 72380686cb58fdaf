"""`merge` keeps the rows that name another row pointing at the same record: a stalls row names its
copy by transfers.id and an nccl_stalls row its operation by nccl_ops.id, and ids restart at 1 in
every input. Before, the merged stall pointed at whatever copy of another process held that id."""
import sqlite3
from harness import *


def make_input(name, copies_round):
    db = tempdb(name)
    for _ in range(copies_round):
        run([program("rt_peer"), "basic"], db=db)
    with sqlite3.connect(db) as c:
        # The last copy of the last process stalled; the drainer writes the copy's own values.
        tid, pid, api, src, dst, size = c.execute(
            "SELECT id, process_id, api, src_device, dst_device, bytes FROM transfers "
            "ORDER BY id DESC LIMIT 1").fetchone()
        c.execute("INSERT INTO stalls (process_id, transfer_id, api, src_device, dst_device, bytes, "
                  "started_ns, waited_ns) VALUES (?, ?, ?, ?, ?, ?, 1, 2000000000)",
                  (pid, tid, api, src, dst, size))
        # An NCCL operation of that process that stalled, as the drainer records both.
        serial, seq = c.execute("SELECT max(thread_serial), max(seq) + 1 FROM transfers "
                                "WHERE process_id = ?", (pid,)).fetchone()
        c.execute("INSERT INTO nccl_ops (process_id, comm_serial, kind, func, op_seq, bytes, state, "
                  "thread_serial, seq) VALUES (?, 1, 'coll', 'AllReduce', 7, ?, 'running', ?, ?)",
                  (pid, 4096 * copies_round, serial, seq))
        oid = c.execute("SELECT max(id) FROM nccl_ops").fetchone()[0]
        c.execute("INSERT INTO nccl_stalls (process_id, op_id, comm_serial, kind, func, op_seq, bytes, "
                  "started_ns, running_ns) VALUES (?, ?, 1, 'coll', 'AllReduce', 7, ?, 1, 1)",
                  (pid, oid, 4096 * copies_round))
    return db


one = make_input("one.db", 1)
two = make_input("two.db", 2)
out = tempdb("out.db")
for source in (one, two):
    proc = cli("merge", out, source)
    equal(proc.returncode, 0, "merge exits 0 (%s)" % proc.stderr.strip())

equal(scalar(out, "SELECT count(*) FROM stalls"), 2, "both stalls arrive")
pairs = query(out, "SELECT s.process_id, t.process_id, s.api, t.api, s.bytes, t.bytes, s.src_device, "
                   "t.src_device FROM stalls s LEFT JOIN transfers t ON t.id = s.transfer_id")
for sp, tp, sa, ta, sb, tb, ss, ts in pairs:
    equal(tp, sp, "the stall's copy is a copy of the stall's own process")
    equal((ta, tb, ts), (sa, sb, ss), "the stall names the copy that stalled (%s, %s bytes)" % (sa, sb))

equal(scalar(out, "SELECT count(*) FROM nccl_stalls"), 2, "both NCCL stalls arrive")
ops = query(out, "SELECT s.process_id, o.process_id, s.bytes, o.bytes FROM nccl_stalls s "
                 "LEFT JOIN nccl_ops o ON o.id = s.op_id")
for sp, op, sb, ob in ops:
    equal((op, ob), (sp, sb), "the NCCL stall names its own operation (%s bytes)" % sb)

# Merging the same input again adds nothing and moves no pointer.
before = query(out, "SELECT id, transfer_id FROM stalls ORDER BY id")
equal(cli("merge", out, two).returncode, 0, "a second merge of the same input exits 0")
equal(query(out, "SELECT id, transfer_id FROM stalls ORDER BY id"), before,
      "a second merge changes no stall")
equal(scalar(out, "PRAGMA foreign_key_check"), None, "no row names a row that is not there")
done()
