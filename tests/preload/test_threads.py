"""Many threads copying at once: every call is one row, keyed per thread, nothing dropped."""
from harness import *

db = tempdb()
proc = run([program("rt_peer"), "threads", "16", "300"], db=db)
exp = expectations(proc.stdout)
equal(scalar(db, "SELECT count(*) FROM transfers"), exp["transfers"], "a row per call from 16 threads")
equal(scalar(db, "SELECT sum(bytes) FROM transfers"), exp["bytes"], "bytes match")
equal(scalar(db, "SELECT count(DISTINCT thread_id) FROM transfers"), 16, "16 threads seen")
equal(scalar(db, "SELECT count(*) FROM (SELECT thread_serial, seq FROM transfers GROUP BY 1, 2 HAVING count(*) > 1)"),
      0, "no duplicate (thread, seq)")
equal(scalar(db, "SELECT sum(records_dropped) FROM processes"), 0, "nothing dropped")
done()
