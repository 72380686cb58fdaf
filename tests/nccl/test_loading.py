"""NCCL finds the guard as its profiler plugin with no step of the user's: the preload constructor
points NCCL_PROFILER_PLUGIN at the guard's core (libp2pguard-core.so beside it), NCCL (here the simulated one, which loads
plugins by NCCL's rules) takes the newest ncclProfiler_vN its version knows, and the
communicator's row names that version. P2PGUARD_NCCL=0 and NCCL_PROFILER_PLUGIN=none leave NCCL
without the guard; a process that is not guarded records nothing; a child inherits the offer."""
import os
from ncclsim import *

CORE = os.path.join(os.path.dirname(os.path.realpath(LIB)), "libp2pguard-core.so")

for nccl, version in (("2.27", 4), ("2.28", 5), ("2.30", 6)):
    db = tempdb()
    proc = sim(["--nccl", nccl, "sendrecv", 3, 4096, 0], db=db)
    line = loaded_line(proc.stderr) or ""
    check("loaded p2pguard as v%d from %s" % (version, CORE) in line,
          "NCCL %s loads the guard by its absolute path as ncclProfiler_v%d (%s)" % (nccl, version, line))
    equal(query(db, "SELECT profiler_version, rank, nranks FROM nccl_comms"), [(version, 0, 1)],
          "NCCL %s: the communicator's row says v%d" % (nccl, version))
    equal(scalar(db, "SELECT count(*) FROM nccl_ops WHERE state = 'done'"), 6,
          "NCCL %s: 3 sends and 3 receives recorded" % nccl)
    equal(proc.stdout + proc.stderr.replace(line, "").strip(), "",
          "NCCL %s: nothing else printed (the guard is quiet)" % nccl)

# NCCL 2.26 knows v1 to v3 only, whose init names no communicator: it loads the guard as v3, the
# guard records nothing (and would feed a plugin of the user's, tests/nccl/test_chain.py).
db = tempdb()
proc = sim(["--nccl", "2.26", "sendrecv", 3, 4096, 0], db=db)
check("loaded p2pguard as v3" in (loaded_line(proc.stderr) or ""),
      "NCCL 2.26 loads the guard as ncclProfiler_v3")
check(not os.path.exists(db) or scalar(db, "SELECT count(*) FROM sqlite_master WHERE name = 'nccl_ops'") == 0
      or scalar(db, "SELECT count(*) FROM nccl_ops") == 0, "NCCL 2.26: nothing recorded")

db = tempdb()
proc = sim(["sendrecv", 2, 4096, 0], db=db, P2PGUARD_NCCL="0")
check(loaded_line(proc.stderr) is None and "no profiler plugin" in proc.stderr,
      "P2PGUARD_NCCL=0: NCCL finds no plugin (%s)" % proc.stderr.strip())
check(not os.path.exists(db) or scalar(db, "SELECT count(*) FROM sqlite_master WHERE name = 'nccl_ops'") == 0
      or scalar(db, "SELECT count(*) FROM nccl_ops") == 0, "P2PGUARD_NCCL=0: no NCCL rows")

db = tempdb()
proc = sim(["sendrecv", 2, 4096, 0], db=db, NCCL_PROFILER_PLUGIN="none")
check(loaded_line(proc.stderr) is None, "NCCL_PROFILER_PLUGIN=none is the user's: no plugin at all")

db = tempdb()
proc = sim(["sendrecv", 2, 4096, 0], db=db, preload=False)
check(loaded_line(proc.stderr) is None, "without the guard NCCL finds no plugin (none installed)")

db = tempdb()
proc = sim(["sendrecv", 2, 4096, 0], db=db, P2PGUARD_NCCL="maybe")
check("p2pguard: P2PGUARD_NCCL=maybe is not understood (accepted: 0, 1); using 1" in proc.stderr,
      "a bad P2PGUARD_NCCL is one clear line")
check(loaded_line(proc.stderr) is not None, "and the default (on) is used")

# A child that drops LD_PRELOAD still has NCCL_PROFILER_PLUGIN: its NCCL loads the core by path,
# which feeds a plugin of the user's (test_chain.py) but records nothing: the process is not
# guarded (none of its CUDA calls is seen), and its rows would say otherwise.
db = tempdb()
env = sim_env(db)
env["KEEP_PRELOAD"] = ":".join(SANITIZER_PRELOAD)  # a sanitizer's runtime still comes first
script = 'LD_PRELOAD="$KEEP_PRELOAD" exec "$0" sendrecv 2 4096 0'
proc = subprocess.run(["sh", "-c", script, SIMNCCL], env=env, capture_output=True, text=True,
                      timeout=60)
check(proc.returncode == 0 and "loaded p2pguard as v5" in proc.stderr,
      "a child without the preload inherits the offer (%s)" % proc.stderr.strip())
check(not os.path.exists(db) or scalar(db, "SELECT count(*) FROM sqlite_master WHERE name = 'nccl_ops'") == 0
      or scalar(db, "SELECT count(*) FROM nccl_ops") == 0, "and, not guarded, records nothing")
done()
