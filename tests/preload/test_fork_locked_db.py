"""A fork() while another process holds the database's write lock returns promptly.

The drainer holds the lock that fork() waits for while it works in SQLite; README bounds that wait
by the 100 ms a pass waits for another rank's lock. Opening the database (whose schema statements
write) must respect the same bound.
"""
import sqlite3
import subprocess
import sys
import textwrap
import time
from harness import *

script = textwrap.dedent(r'''
    import ctypes, os, sys, time
    rt = ctypes.CDLL("libcudart.so.13")
    def alloc(dev):
        rt.cudaSetDevice(dev)
        p = ctypes.c_void_p()
        assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(4096)) == 0
        return p
    a, b = alloc(0), alloc(1)
    assert rt.cudaMemcpyPeer(b, 1, a, 0, ctypes.c_size_t(4096)) == 0  # starts the drainer
    time.sleep(0.3)  # the drainer is opening the database by now
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    elapsed = time.monotonic() - t0
    os.waitpid(pid, 0)
    print("EXPECT fork_ms=%d" % int(elapsed * 1000))
''')

db = tempdb()
# The database exists (WAL, schema) from an earlier guarded run.
run([sys.executable, "-c", script], db=db)
holder = sqlite3.connect(db, timeout=10, isolation_level=None)
holder.execute("BEGIN IMMEDIATE")
holder.execute("UPDATE processes SET rank = rank")
proc = subprocess.Popen([sys.executable, "-c", script], env=environment(db), stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
time.sleep(3)
holder.execute("COMMIT")
holder.close()
out, err = proc.communicate(timeout=60)
exp = expectations(out)
equal(proc.returncode, 0, "the program ran")
fork_ms = exp.get("fork_ms")
check(fork_ms is not None and fork_ms < 1000,
      "fork() waited %r ms on a drainer blocked by another process's lock" % fork_ms)
# The program may have ended before the lock was released: its records wait in the spool.
run([CLI, "recover", db], preload=False)
equal(scalar(db, "SELECT count(*) FROM transfers"), 2, "both runs' copies are recorded")
done()
