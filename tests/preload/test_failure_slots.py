"""Failures while the drainer cannot write (another connection holds the database's write lock):
every failing call keeps its peer_access row, the first 128 failures get their failures entry
(diagnosis, stacks) from the spool's failure slots, and each failure past that is counted in
processes.records_dropped, so that failures rows + records_dropped == the calls that failed."""
import sqlite3
import sys
from harness import *

CALLS = 200
SLOTS = 128  # P2PG_SPOOL_BLOBS

db = tempdb()
run([program("rt_peer"), "basic"], db=db)  # the database and its schema exist

holder = sqlite3.connect(db, isolation_level=None, timeout=30)
holder.execute("BEGIN IMMEDIATE")
script = ("import ctypes\n"
          "rt = ctypes.CDLL('libcudart.so.13')\n"
          "rt.cudaSetDevice(0)\n"
          "print(sum(rt.cudaDeviceEnablePeerAccess(0, 0) != 0 for _ in range(%d)))\n" % CALLS)
proc = run([sys.executable, "-c", script], db=db)
holder.execute("ROLLBACK")
holder.close()
equal(int(proc.stdout.strip()), CALLS, "every enable of the device's own ordinal failed")

rec = subprocess.run([CLI, "recover", db], capture_output=True, text=True, env=environment(preload=False))
equal(rec.returncode, 0, "recover exits 0 (%s)" % rec.stderr.strip())
pid = scalar(db, "SELECT id FROM processes ORDER BY id DESC LIMIT 1")
failures = scalar(db, "SELECT count(*) FROM failures WHERE process_id = ?", pid)
dropped = scalar(db, "SELECT records_dropped FROM processes WHERE id = ?", pid)
calls = scalar(db, "SELECT count(*) FROM peer_access WHERE process_id = ? AND status != 0", pid)
equal(calls, CALLS, "each failing call has its peer_access row")
# The process's devices wait in one of those slots too when they were written before the failures
# took them all (then they are in the database after recover); otherwise every slot was a failure's.
devices_slot = 1 if scalar(db, "SELECT count(*) FROM devices WHERE process_id = ?", pid) else 0
equal(failures, SLOTS - devices_slot,
      "the failures that found a slot have their entry (%d slots, %d taken by the devices)"
      % (SLOTS, devices_slot))
# The process never wrote to the database: recover writes the rule its failures name.
equal(query(db, "SELECT DISTINCT r.id FROM failures f JOIN rules r ON r.id = f.rule_id"),
      [("cuda/peer-access-to-own-device",)], "recover stored the rule the recovered failures name")
equal(failures + dropped, CALLS, "and the rest are counted as lost: %d + %d" % (failures, dropped))
done()
