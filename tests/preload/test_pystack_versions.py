"""The Python line of a failing call made without the GIL, and a crash's Python stack, under every
Python installed here: a real script calling the runtime through ctypes.CDLL, under the preload.
3.13 and 3.14 are read by the walk by their debug offsets; earlier ones through the interpreter's
traceback writer where the build exports it (3.8, 3.11 and 3.12 here; pyenv's 3.9 and 3.10 builds
do not, and there a call without the GIL has no stack, as before). Versions that are not
installed are said, not installed."""
import os
import signal
import subprocess
import sys

from harness import *

PY_PEER = os.path.join(SOURCE, "tests/programs/py_peer.py")
FIND = os.path.join(SOURCE, "tests/diagnosis/find_pythons.py")


def line_of(path, marker):
    return [n for n, l in enumerate(open(path), 1) if marker in l][0]


found = subprocess.run([sys.executable, FIND], capture_output=True, text=True, check=True).stdout
pythons = []
for line in found.splitlines():
    words = line.split()
    if words[0] == "missing":
        print("# python%s: not installed here, not tested" % words[1])
    else:
        pythons.append((words[0], words[1]))
check(pythons, "at least one Python found (%s)" % found.strip())

CAPABILITY = ("import ctypes, sys\n"
              "print(any(hasattr(ctypes.pythonapi, n) for n in ('_Py_DumpTraceback', "
              "'PyUnstable_DumpTraceback')))\n")

failing = line_of(PY_PEER, "# the failing line")
caller = line_of(PY_PEER, "status = enable_own_device()")
for version, python in pythons:
    free_threaded = version.endswith("t")
    writer = subprocess.run([python, "-c", CAPABILITY], capture_output=True, text=True).stdout.strip() == "True"
    walk = version in ("3.13", "3.14")
    if not writer and not walk and not free_threaded:
        print("# %s (%s): no traceback writer exported and no debug offsets: no stack without "
              "the GIL" % (version, python))
    for variant in (["cdll"], ["cdll", "thread"]):
        db = tempdb()
        proc = run([python, PY_PEER] + variant, db=db)
        stack = scalar(db, "SELECT python_stack FROM failures")
        what = "%s (%s) %s" % (version, python, " ".join(variant))
        if free_threaded or not (writer or walk):
            # No walk is done on a free-threaded build, nor by a writer that is not exported:
            # without the GIL, nothing (and no crash).
            equal(stack, None, "%s: no stack without the GIL here" % what)
            continue
        lines = stack.splitlines() if stack else []
        check(lines and lines[0].endswith("py_peer.py:%d in enable_own_device" % failing),
              "%s: GIL released, the stack starts at the failing line (%r)" % (what, lines[:1]))
        check(any(l.endswith("py_peer.py:%d in main" % caller) for l in lines),
              "%s: and goes up through main() (%r)" % (what, stack))
        last = " in _bootstrap" if "thread" in variant else " in <module>"
        check(lines and lines[-1].endswith(last), "%s: and ends%s (%r)" % (what, last, lines[-1:]))

    # A segfault in Python code: the crash row's Python stack, read in the signal handler.
    db = tempdb()
    script = os.path.join(os.path.dirname(db), "segv.py")
    with open(script, "w") as f:
        f.write("import ctypes\n"
                "rt = ctypes.CDLL('libcudart.so.13')\n"
                "\n"
                "def use_gpu():\n"
                "    rt.cudaSetDevice(0)\n"
                "\n"
                "def crash():\n"
                "    ctypes.string_at(0)\n"
                "\n"
                "use_gpu()\n"
                "crash()\n")
    proc = run([python, script], db=db, check=False)
    equal(proc.returncode, -signal.SIGSEGV, "%s: the script still dies of SIGSEGV" % version)
    py = scalar(db, "SELECT python_stack FROM crashes")
    lines = py.splitlines() if py else []
    if free_threaded or not (writer or walk):
        equal(py, None, "%s: the crash has no Python stack here" % version)
        continue
    check(any(l.endswith("segv.py:8 in crash") for l in lines) and lines and
          lines[-1].endswith("segv.py:11 in <module>"),
          "%s: the crash's Python stack names the crashing line and the module's (%r)" % (version, py))
done()
