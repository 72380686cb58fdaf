"""A user's rules folder made to hurt (P2PGUARD_RULES): regexes whose repetitions blow up glibc's
regcomp() (memory, time, stack), and symbolic link loops. The guarded program runs as bare, its
fork() does not wait for the rules, each problem is one line, and `explain` and `rules validate`
finish at once."""
import json
import os
import time
from harness import *


def lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("p2pguard:")]


def rule(rule_id, regex):
    return {"id": rule_id, "signature": "hostile", "root_cause": "a regex made to hurt",
            "codes": [999], "regex": regex, "workarounds": [{"action": "none", "success_rate": 0.1}],
            "confidence": 0.5,
            "examples": {"matches": [{"text": "x"}], "near_misses": [{"text": "nothing"}]}}


bare_errors = run([program("rt_peer"), "errors"], preload=False)
bare_fork = run([program("rt_peer"), "fork"], preload=False)

# Nested {,n} intervals (not counted before: the program segfaulted in the drainer's regcomp), and
# a run of optional parts the old count let through (1.9 GB, 6.6 s, deeper than the drainer's stack).
for name, regex in (("nested", "x((((((c){,9}){,9}){,9}){,9}){,9}){,9}"), ("optional", "(x?){5000}")):
    folder = tempfolder()
    os.makedirs(os.path.join(folder, "site"))
    with open(os.path.join(folder, "site", name + ".json"), "w") as f:
        json.dump(rule("site/" + name, regex), f, indent=2)
    db = tempdb()
    t0 = time.monotonic()
    proc = run([program("rt_peer"), "errors"], db=db, check=False, P2PGUARD_RULES=folder, timeout=60)
    took = time.monotonic() - t0
    equal(proc.returncode, bare_errors.returncode, "%s regex: the program's status is a bare run's (no SIGSEGV)" % name)
    equal(proc.stdout, bare_errors.stdout, "%s regex: its output is a bare run's" % name)
    said = lines(proc.stderr)
    equal(len(said), 1, "%s regex: one line (%s)" % (name, said))
    check(said and "regex too large" in said[0] and name + ".json" in said[0], "%s regex: it names the file and the reason" % name)
    check(took < 20, "%s regex: the run took %.1f s" % (name, took))
    equal(scalar(db, "SELECT rule_id FROM failures WHERE status = 217"), "cuda/peer-access-to-own-device",
          "%s regex: the built-in rules still diagnose" % name)
    t0 = time.monotonic()
    val = cli("rules", "validate", folder)
    check(val.returncode != 0 and "regex too large" in val.stdout + val.stderr and time.monotonic() - t0 < 10,
          "%s regex: `rules validate` refuses it at once (%.1f s)" % (name, time.monotonic() - t0))
    t0 = time.monotonic()
    exp = cli("explain", "peer access is not supported between these two devices", P2PGUARD_RULES=folder)
    check(exp.returncode == 0 and time.monotonic() - t0 < 10, "%s regex: `explain` with it still explains (%d)" % (name, exp.returncode))

# A thread with a small stack fails a peer call first, with a user rule near the bounds: the rules
# are compiled on a stack of the guard's own, not that thread's.
folder = tempfolder()
os.makedirs(os.path.join(folder, "site"))
with open(os.path.join(folder, "site", "edge.json"), "w") as f:
    json.dump(rule("site/edge", "x(y|z?){128}"), f, indent=2)
script = """
import ctypes, threading
rt = ctypes.CDLL("libcudart.so.13")
def fail():
    rt.cudaSetDevice(0)
    print("status", rt.cudaDeviceEnablePeerAccess(0, 0))
threading.stack_size(64 * 1024)
t = threading.Thread(target=fail)
t.start()
t.join()
print("done")
"""
db = tempdb()
proc = run([sys.executable, "-c", script], db=db, check=False, P2PGUARD_RULES=folder, timeout=60)
equal(proc.returncode, 0, "a 64 KiB thread's failure with a user rule: the program exits 0 (%s)" % proc.stderr.strip()[-200:])
check("status 217" in proc.stdout and "done" in proc.stdout, "and its call got the driver's answer")
equal(scalar(db, "SELECT rule_id FROM failures"), "cuda/peer-access-to-own-device", "and the failure is diagnosed")
# Without a user's folder the 64 KiB thread reads the built-in rules itself: they compile no regex
# in the guard's process.
db = tempdb()
proc = run([sys.executable, "-c", script], db=db, check=False, timeout=60)
equal(proc.returncode, 0, "a 64 KiB thread's failure, built-in rules only: the program exits 0 (%s)" % proc.stderr.strip()[-200:])
check("status 217" in proc.stdout and "done" in proc.stdout, "and its call got the driver's answer")
equal(scalar(db, "SELECT rule_id FROM failures"), "cuda/peer-access-to-own-device", "and the failure is diagnosed")

# Four links back to the folder itself: 4^16 folder visits before; the job hung, and fork() in it.
folder = tempfolder()
os.makedirs(os.path.join(folder, "site"))
for k in range(4):
    os.symlink(".", os.path.join(folder, "x%d" % k))
db = tempdb()
t0 = time.monotonic()
proc = run([program("rt_peer"), "fork"], db=db, check=False, P2PGUARD_RULES=folder, timeout=60)
took = time.monotonic() - t0
equal(proc.returncode, bare_fork.returncode, "link loops: the program (it forks) exits as bare")
check(took < 20, "link loops: the run took %.1f s" % took)
said = lines(proc.stderr)
# The parent and its forked child each read the rules once (the child may start before the parent
# read them): each says one line per link.
equal(len(set(said)), 4, "link loops: one line per link (%s)" % sorted(set(said)))
check(len(said) in (4, 8), "link loops: said once by each process that read the rules (%d lines)" % len(said))
exp = expectations(proc.stdout)
equal(scalar(db, "SELECT count(*) FROM transfers"), exp["parent_transfers"] + exp["child_transfers"],
      "link loops: the parent's and the child's copies are rows")

# A folder slow to read (400 entries, each compiled), and the program forks while the drainer reads
# it with no lock held: the child, which has no such reader, reads its own rules and runs on (a
# child that inherited the reader's lock waited for ever).
folder = tempfolder()
os.makedirs(os.path.join(folder, "site"))
for k in range(400):
    with open(os.path.join(folder, "site", "r%03d.json" % k), "w") as f:
        json.dump(rule("site/r%03d" % k, "(a|b|c)+x%d(y|z?){8}" % k), f)
runs = []
for k in range(8):
    db = tempdb()
    proc = run([program("rt_peer"), "fork"], db=db, check=False, P2PGUARD_RULES=folder, timeout=60)
    exp = expectations(proc.stdout)
    runs.append((proc.returncode, scalar(db, "SELECT count(*) FROM transfers") == exp.get("parent_transfers", -1) + exp.get("child_transfers", -1)))
equal(runs, [(0, True)] * 8, "fork while the rules are read: each run ends, with both processes' copies")

# Two links made 131,072 lines before; and a folder of many broken files says at most 20 and a count.
folder = tempfolder()
for k in range(2):
    os.symlink(".", os.path.join(folder, "y%d" % k))
os.makedirs(os.path.join(folder, "bad"))
for k in range(50):
    with open(os.path.join(folder, "bad", "b%02d.json" % k), "w") as f:
        f.write("{ not json")
proc = run([program("rt_peer"), "errors"], db=tempdb(), check=False, P2PGUARD_RULES=folder, timeout=60)
said = lines(proc.stderr)
equal(len(said), 21, "52 problems: 20 lines and one that counts the rest (%d lines)" % len(said))
check(said and "32 more problems" in said[-1] and "rules validate" in said[-1], "the last says how many more and how to see them (%s)" % said[-1:])
done()
