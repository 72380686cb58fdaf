"""The conformance suite under the guard: every program's checks give the same answers with and
without it (measured times aside), so observe mode changes nothing the suite can see."""
import glob
import os
import re
from harness import *

programs = sorted(glob.glob(os.path.join(BUILD, "tests/conformance/conformance_*")))
check(len(programs) >= 5, "found the conformance programs (%d)" % len(programs))
for path in programs:
    if not os.access(path, os.X_OK) or os.path.isdir(path):
        continue
    name = os.path.basename(path)
    bare = run([path], preload=False, check=False)
    guarded = run([path], db=tempdb(), check=False)
    equal(guarded.returncode, bare.returncode, name + ": same exit status")
    strip = lambda text: re.sub(r"[0-9][0-9.]*", "N", text)
    equal(strip(guarded.stdout), strip(bare.stdout), name + ": same check lines (%d)" % bare.stdout.count("\n"))
done()
