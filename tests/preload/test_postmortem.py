"""After a job dies the database tells the story: the Python line of a failing call made without
the GIL (ctypes.CDLL, a threading.Thread, a C extension that releases it), a segfault's crash row
with its C and Python stacks there at once (no `p2pguard recover`), a processes row for a CUDA
process that made no peer call (and nothing for one that never initialised CUDA), demangled C++
frames, and an old database given the new column."""
import ctypes
import os
import signal
import sqlite3
import sys
import sysconfig
from harness import *

# Whether the guard can read this Python's stack without the GIL: through its signal-safe traceback
# writer where the build exports it (_Py_DumpTraceback: 3.8, 3.11, 3.12 here), or by its debug
# offsets (3.13, 3.14, not free-threaded). Without either it reads a stack only while the thread
# holds the GIL, and the checks below expect exactly that (test_pystack_versions runs every
# installed Python).
WRITER = any(hasattr(ctypes.pythonapi, name) for name in ("_Py_DumpTraceback", "PyUnstable_DumpTraceback")) or (
    sys.version_info[:2] in ((3, 13), (3, 14)) and not sysconfig.get_config_var("Py_GIL_DISABLED"))
print("# Python %s: stacks without the GIL %s" % (sys.version.split()[0], "read" if WRITER else "not read"))

PY_PEER = os.path.join(SOURCE, "tests/programs/py_peer.py")


def line_of(path, marker):
    return [n for n, l in enumerate(open(path), 1) if marker in l][0]


def first_line(text):
    return text.splitlines()[0] if text else None


# ctypes.CDLL releases the GIL around every call.
for variant in (["cdll"], ["cdll", "thread"], ["pydll", "thread"]):
    db = tempdb()
    proc = run([sys.executable, PY_PEER] + variant, db=db)
    exp = expectations(proc.stdout)
    equal(exp.get("failures"), 1, "%s: the script ran its failing call" % " ".join(variant))
    stack = scalar(db, "SELECT python_stack FROM failures")
    line = line_of(PY_PEER, "# the failing line")
    if not WRITER and "cdll" in variant:
        equal(stack, None, "%s: without the writer and the GIL, no Python stack" % " ".join(variant))
        continue
    check(stack is not None and first_line(stack).endswith("py_peer.py:%d in enable_own_device" % line),
          "%s: the failure's Python stack starts at the failing line (%r)" % (" ".join(variant), first_line(stack)))
    check(stack is not None and "py_peer.py:%d in main" % line_of(PY_PEER, "status = enable_own_device()") in stack,
          "%s: and goes up through main() (%r)" % (" ".join(variant), stack))
    if "thread" in variant:
        check(stack is not None and stack.splitlines()[-1].endswith(" in _bootstrap"),
              "thread: the stack ends in threading's _bootstrap (%r)" % (stack.splitlines()[-1] if stack else None))
    else:
        check(stack is not None and stack.splitlines()[-1].endswith(" in <module>"),
              "the stack ends at the module (%r)" % (stack.splitlines()[-1] if stack else None))
    where = scalar(db, "SELECT python_where FROM failure_report")
    check(where and "py_peer.py:%d" % line in where, "%s: failure_report shows the line" % " ".join(variant))

# A C extension that releases the GIL around its CUDA call (Py_BEGIN_ALLOW_THREADS), as PyTorch does.
db = tempdb()
script = os.path.join(os.path.dirname(db), "train.py")
with open(script, "w") as f:
    f.write("import gil_release\n"
            "\n"
            "def step():\n"
            "    return gil_release.enable_peer_access(0, 0)  # the extension's call\n"
            "\n"
            "print('EXPECT status=%d' % step())\n")
proc = run([sys.executable, script], db=db, PYTHONPATH=PROGRAMS)
equal(expectations(proc.stdout).get("status"), 217, "the extension's call failed as the runtime says")
stack = scalar(db, "SELECT python_stack FROM failures")
check(not WRITER and stack is None or stack is not None and first_line(stack).endswith("train.py:4 in step"),
      "the C extension's failure names the Python line that called it (%r)" % first_line(stack))
check(not WRITER or stack is not None and stack.splitlines()[-1].endswith("train.py:6 in <module>"),
      "and the module's line")
bt = scalar(db, "SELECT backtrace FROM failures")
check(bt and "enable_peer_access" in bt, "the C backtrace shows the extension's function")

# A Python program that segfaults in its own code, with no peer call: its crash row has both stacks
# and is in the database as soon as the process is gone.
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
proc = run([sys.executable, script], db=db, check=False)
equal(proc.returncode, -signal.SIGSEGV, "the script still dies of SIGSEGV")
rows = query(db, "SELECT signal, backtrace, python_stack FROM crashes")
equal(len(rows), 1, "the crash row is there without `p2pguard recover`")
if rows:
    sig, bt, py = rows[0]
    equal(sig, signal.SIGSEGV, "its signal")
    check(bt and "string_at" in bt, "its C backtrace shows ctypes' string_at (%r)" % first_line(bt))
    lines = py.splitlines() if py else []
    if not WRITER:
        equal(py, None, "without the traceback writer a crash has no Python stack")
    else:
        check(any(l.endswith("segv.py:8 in crash") for l in lines), "its Python stack names the crashing line (%r)" % py)
        check(lines and lines[-1].endswith("segv.py:11 in <module>"), "and the module's line")
        check(lines and lines[0].endswith(" in string_at"), "innermost first (%r)" % (lines[0] if lines else None))
equal(scalar(db, "SELECT count(*) FROM processes"), 1, "the process that made no peer call has its row")
equal(scalar(db, "SELECT count(*) FROM peer_access") + scalar(db, "SELECT count(*) FROM transfers"), 0,
      "and no peer rows")

# A CUDA process that makes no peer call has its processes row; report can tell it made none.
db = tempdb()
script = os.path.join(os.path.dirname(db), "one_gpu.py")
with open(script, "w") as f:
    f.write("import ctypes\n"
            "rt = ctypes.CDLL('libcudart.so.13')\n"
            "p = ctypes.c_void_p()\n"
            "assert rt.cudaSetDevice(0) == 0\n"
            "assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(4096)) == 0\n")
run([sys.executable, script], db=db)
rows = query(db, "SELECT pid, cmdline FROM processes")
equal(len(rows), 1, "one processes row for a CUDA process with no peer call")
check(rows and "one_gpu.py" in rows[0][1], "its command line")
NO_PEER_CALL = """SELECT count(*) FROM processes p WHERE
  NOT EXISTS (SELECT 1 FROM transfers t WHERE t.process_id = p.id) AND
  NOT EXISTS (SELECT 1 FROM transfer_summary s WHERE s.process_id = p.id) AND
  NOT EXISTS (SELECT 1 FROM peer_access a WHERE a.process_id = p.id) AND
  NOT EXISTS (SELECT 1 FROM failures f WHERE f.process_id = p.id)"""
equal(scalar(db, NO_PEER_CALL), 1, "docs/database.md's query counts it as a process with no peer call")
run([program("rt_peer"), "basic"], db=db)
equal(scalar(db, "SELECT count(*) FROM processes"), 2, "a peer-calling process is a second row")
equal(scalar(db, NO_PEER_CALL), 1, "which the query does not count")

# A process that never initialises CUDA makes nothing.
db = tempdb()
run([sys.executable, "-c", "import ctypes; ctypes.CDLL('libcudart.so.13'); print('no cuda call')"], db=db)
check(not os.path.exists(db), "a process that never calls cuInit creates no database")
check(not os.path.exists(db + ".spool") or not os.listdir(db + ".spool"), "nor a spool")

# C++: the failing call's backtrace shows the frame demangled.
db = tempdb()
proc = run([program("cxx_peer")], db=db)
equal(expectations(proc.stdout).get("status"), 217, "the C++ program's call failed")
bt = scalar(db, "SELECT backtrace FROM failures")
check(bt and " enable_peers(int)+0x" in bt, "the backtrace shows enable_peers(int) (%r)" % bt)
check(bt and "_Z12enable_peersi" not in bt, "not the mangled name")
# And a C++ crash, symbolised by the drainer at once.
db = tempdb()
proc = run([program("cxx_peer"), "crash"], db=db, check=False)
equal(proc.returncode, -signal.SIGSEGV, "the C++ program dies of SIGSEGV")
bt = scalar(db, "SELECT backtrace FROM crashes")
check(bt is not None and " crash_in_cxx(int)+0x" in first_line(bt),
      "the crash backtrace starts in crash_in_cxx(int) (%r)" % first_line(bt))
equal(scalar(db, "SELECT python_stack FROM crashes"), None, "a C++ program's crash has no Python stack")

# When the final import cannot happen (here the database cannot be opened: its path is a folder),
# the spool keeps the crash for `p2pguard recover`, whose symbolisation demangles too (the CLI is a
# C program: it opens the C++ runtime for its demangler).
db = tempdb()
os.mkdir(db)
proc = run([program("cxx_peer"), "crash"], db=db, check=False)
equal(proc.returncode, -signal.SIGSEGV, "with no usable database the C++ program still dies of SIGSEGV")
check(len(os.listdir(db + ".spool")) == 1, "its spool is left for recovery")
os.rmdir(db)
recover = subprocess.run([CLI, "recover", db], capture_output=True, text=True, env=environment(preload=False))
check("recovered 1 spool file" in recover.stdout, "recover imports it (%s)" % recover.stdout.strip())
bt = scalar(db, "SELECT backtrace FROM crashes")
check(bt is not None and " crash_in_cxx(int)+0x" in first_line(bt),
      "the recovered crash is demangled too (%r)" % first_line(bt))

# A database made before crashes.python_stack existed (0.1's, schema 1) gets the column when the
# guard opens it.
db = tempdb()
con = sqlite3.connect(db)
con.execute("PRAGMA user_version = 1")
con.execute("CREATE TABLE processes (id INTEGER PRIMARY KEY, pid INTEGER NOT NULL, hostname TEXT, rank INTEGER, "
            "local_rank INTEGER, cmdline TEXT, started_ns INTEGER NOT NULL, mode TEXT, guard_version TEXT, "
            "driver_version INTEGER, boot_id TEXT NOT NULL, records_dropped INTEGER NOT NULL DEFAULT 0, "
            "recovered INTEGER NOT NULL DEFAULT 0, UNIQUE (boot_id, pid, started_ns))")
con.execute("CREATE TABLE crashes (id INTEGER PRIMARY KEY, process_id INTEGER NOT NULL, thread_id INTEGER, "
            "signal INTEGER, backtrace TEXT, started_ns INTEGER, UNIQUE (process_id, thread_id, started_ns))")
con.commit()
con.close()
script = os.path.join(os.path.dirname(db), "one_gpu.py")
with open(script, "w") as f:
    f.write("import ctypes\nassert ctypes.CDLL('libcudart.so.13').cudaSetDevice(0) == 0\n")
run([sys.executable, script], db=db)
columns = [r[1] for r in query(db, "PRAGMA table_info(crashes)")]
check("python_stack" in columns, "an old database's crashes table gets python_stack (%r)" % columns)
equal(scalar(db, "SELECT count(*) FROM processes"), 1, "and the process's row")
done()
