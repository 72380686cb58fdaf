"""Long jobs: P2PGUARD_RECORD=summary folds finished NCCL operations per communicator, function,
peer and size (nccl_op_summary) instead of a row each; and when the rings are full (the database
locked by another rank, the drainer starved) finished operations fold into nccl_op_overflow. Either
way nccl_totals counts every operation exactly once, and nothing is dropped."""
import sqlite3
from ncclsim import *

db = tempdb()
sim(["allreduce", 40, 1 << 20], db=db, P2PGUARD_RECORD="summary")
sim(["sendrecv", 25, 4096, 0], db=db, P2PGUARD_RECORD="summary")
equal(scalar(db, "SELECT count(*) FROM nccl_ops"), 0, "summary: no row per operation")
rows = query(db, "SELECT kind, func, peer, size_bucket, count, bytes, gpu_timed FROM "
                 "nccl_op_summary ORDER BY func")
equal(rows, [("coll", "AllReduce", -1, 20, 40, 40 << 20, 40), ("p2p", "Recv", 0, 12, 25, 25 * 4096, 25),
             ("p2p", "Send", 0, 12, 25, 25 * 4096, 25)],
      "one bucket per communicator, function, peer and size, with counts, bytes and GPU-timed")
equal(query(db, "SELECT func, ops, bytes FROM nccl_totals ORDER BY func"),
      [("AllReduce", 40, 40 << 20), ("Recv", 25, 25 * 4096), ("Send", 25, 25 * 4096)],
      "nccl_totals counts them")

# More finished operations than a ring holds while another connection holds the write lock: the
# rest fold into the overflow aggregates, none is dropped. Without kernel channels each operation
# ends at NCCL's stop, on the calling thread, so they come as fast as the plugin takes them.
N = 70000
db = tempdb()
# The guard makes the database first (a process with NCCL's plugin off): a database of another
# program's tables would be refused, not written.
sim(["allreduce", 1, 256], db=db, P2PGUARD_NCCL="0")
lock = sqlite3.connect(db, isolation_level=None)
lock.execute("BEGIN IMMEDIATE")
proc = sim(["--channels", 0, "allreduce", N, 256], db=db, timeout=300)
lock.execute("COMMIT")
lock.close()
rec = cli("recover", db)
equal(rec.returncode, 0, "the spool left by the starved drainer is recovered (%s)" % rec.stderr.strip())
folded = scalar(db, "SELECT sum(count) FROM nccl_op_overflow")
rows = scalar(db, "SELECT count(*) FROM nccl_ops WHERE state = 'done'")
check(folded and folded > 0, "operations folded into nccl_op_overflow (%s)" % folded)
equal((rows or 0) + (folded or 0), N, "every operation is a row or folded, once")
equal(scalar(db, "SELECT ops FROM nccl_totals"), N, "nccl_totals counts %d" % N)
equal(scalar(db, "SELECT sum(records_dropped) FROM processes"), 0, "nothing dropped")
equal(query(db, "SELECT DISTINCT func, algorithm, protocol, size_bucket FROM nccl_op_overflow"),
      [("AllReduce", "RING", "SIMPLE", 8)], "the overflow keeps function, algorithm, protocol, size")
done()
