"""The p2pguard command as a user runs it."""
import os
from harness import *


db = tempdb()
proc = cli("run", "--db", db, "--", program("rt_peer"), "basic")
equal(proc.returncode, 0, "run: the program's exit status")
check("EXPECT transfers=" in proc.stdout, "run: the program's own output comes through")
check("p2pguard report: " + db in proc.stdout, "run: a report follows")
check("cudaMemcpyPeer" in proc.stdout and "0->1" in proc.stdout, "run: the report lists the transfers by pair")
check(os.path.exists(db), "run: the database is where --db says")

proc = cli("run", "--db", db, "--", program("rt_peer"), "errors")
check("failures" in proc.stdout and "rule:" in proc.stdout, "run: failures are reported with their rule")

proc = cli("report", db)
equal(proc.returncode, 0, "report: exit 0")
check("processes: 2" in proc.stdout, "report: both runs' processes")
check("do:" in proc.stdout, "report: the full report says what to do")
# How many copies of each API have a copy time (a GPU time: synchronous ones too are GPU-timed).
calls = scalar(db, "SELECT count(*) FROM transfers WHERE api = 'cudaMemcpyPeer'")
timed = scalar(db, "SELECT count(*) FROM transfers WHERE api = 'cudaMemcpyPeer' AND gpu_ns > 0")
check(calls and "cudaMemcpyPeer %d (%d timed)" % (calls, timed) in proc.stdout,
      "report: how many copies of each API carry a copy time (%d of %d)" % (timed, calls))
check("without a copy time" in proc.stdout and "counted as untimed" in proc.stdout,
      "report: says what the bandwidth is computed from")

proc = cli("run", "--db", db, "--", program("rt_peer"), "crash")
equal(proc.returncode, 128 + 11, "run: a program killed by SIGSEGV gives 139")
check("crashes" in proc.stdout and "crash_here" in proc.stdout, "run: the crash is imported and reported at once")

proc = cli("run", "--db", db, "--mode", "staged", "--", program("rt_peer"), "basic")
equal(proc.returncode, 0, "run --mode staged: the program succeeds")
equal(scalar(db, "SELECT mode FROM processes ORDER BY id DESC LIMIT 1"), "staged", "run --mode: recorded mode")

proc = cli("explain", "RuntimeError: CUDA error: peer access is not supported between these two devices")
equal(proc.returncode, 0, "explain: a PyTorch line is understood")
check("cuda/" in proc.stdout, "explain: names the rule")

proc = cli("explain", "704")
equal(proc.returncode, 0, "explain: a bare code is understood")

proc = cli("frobnicate")
equal(proc.returncode, 2, "unknown command: exit 2")
check("unknown command" in proc.stderr, "unknown command: says so")

proc = cli("run", "--db", db, "--", "/nonexistent/program")
equal(proc.returncode, 127, "run: a missing program gives 127")
done()
