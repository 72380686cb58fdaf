"""A forking program: the child is a process of its own in the log."""
from harness import *

db = tempdb()
proc = run([program("rt_peer"), "fork"], db=db)
exp = expectations(proc.stdout)
pids = dict(query(db, "SELECT pid, id FROM processes"))
equal(len(pids), 2, "parent and child are two process rows")
child = pids.get(exp["child_pid"])
check(child is not None, "the child's row has its own pid")
parent = [i for p, i in pids.items() if p != exp["child_pid"]][0]
equal(scalar(db, "SELECT count(*) FROM transfers WHERE process_id = ?", parent), exp["parent_transfers"],
      "parent's calls under the parent")
equal(scalar(db, "SELECT count(*) FROM transfers WHERE process_id = ?", child), exp["child_transfers"],
      "child's calls under the child")
equal(scalar(db, "PRAGMA integrity_check"), "ok", "database integrity")
done()
