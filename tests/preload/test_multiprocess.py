"""Eight ranks of four threads each write one database at once: nothing lost, ranks recorded."""
from harness import *

db = tempdb()
procs = []
for rank in range(8):
    procs.append(subprocess.Popen([program("rt_peer"), "threads", "4", "250"],
                                  env=environment(db, RANK=rank, LOCAL_RANK=rank), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True))
outs = [p.communicate(timeout=300) for p in procs]
# A rank whose exit flush runs past its one-second bound (a loaded machine) leaves its spool behind;
# the next guard on the database, any living rank, or `p2pguard recover` imports it. Do the latter.
subprocess.run([CLI, "recover", db], capture_output=True, env=environment(preload=False), check=True)
equal([p.returncode for p in procs], [0] * 8, "every rank exits 0")
equal(sum(1 for o in outs if o[1]), 0, "no rank printed anything on stderr (no SQLITE_BUSY reached anyone)")
equal(scalar(db, "SELECT count(*) FROM processes"), 8, "eight process rows")
equal(sorted(r[0] for r in query(db, "SELECT rank FROM processes")), list(range(8)), "ranks from RANK")
equal(scalar(db, "SELECT count(*) FROM transfers"), 8 * 4 * 250, "every call of every rank")
equal(scalar(db, "SELECT sum(records_dropped) FROM processes"), 0, "nothing dropped")
done()
