"""A Python script calling the runtime through ctypes: its failure names the script line."""
import os
import sys
from harness import *

script = os.path.join(SOURCE, "tests/programs/py_peer.py")
db = tempdb()
env_lib = {} if REAL else {}
proc = run([sys.executable, script], db=db)
exp = expectations(proc.stdout)
equal(scalar(db, "SELECT count(*) FROM transfers"), exp["transfers"], "ctypes copies are rows")
equal(scalar(db, "SELECT sum(bytes) FROM transfers"), exp["bytes"], "bytes match")
equal(scalar(db, "SELECT count(*) FROM failures"), 1, "one failure")
stack = scalar(db, "SELECT python_stack FROM failures")
line = [n for n, l in enumerate(open(script), 1) if "# the failing line" in l][0]
check(stack and stack.splitlines()[0] == "py_peer.py:%d in enable_own_device" % line or
      (stack and stack.splitlines()[0].endswith("py_peer.py:%d in enable_own_device" % line)),
      "python stack starts at the failing line (%r)" % (stack.splitlines()[0] if stack else None))
check(stack and "in main" in stack, "python stack goes up to main()")
equal(scalar(db, "SELECT rule_id FROM failures"), "cuda/peer-access-to-own-device", "rule for own device")
where = scalar(db, "SELECT python_where FROM failure_report")
check(where and "py_peer.py:%d" % line in where, "failure_report shows where in Python")
done()
