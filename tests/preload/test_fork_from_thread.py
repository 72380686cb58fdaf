"""fork() from a worker thread that has recorded: the child's thread exits cleanly.

The forking thread's ring belongs to the parent's spool, which the child unmaps. When that thread
later ends in the child, nothing of the guard may touch the parent's (unmapped) ring.
"""
import os
import sys
import textwrap
from harness import *

script = textwrap.dedent(r'''
    import ctypes, os, sys, threading
    rt = ctypes.CDLL("libcudart.so.13")
    def alloc(dev):
        rt.cudaSetDevice(dev)
        p = ctypes.c_void_p()
        assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(4096)) == 0
        return p
    a, b = alloc(0), alloc(1)
    result = {}
    def worker():
        assert rt.cudaMemcpyPeer(b, 1, a, 0, ctypes.c_size_t(4096)) == 0
        pid = os.fork()
        if pid == 0:
            return  # the child's only thread ends here: its thread-exit hooks run
        _, status = os.waitpid(pid, 0)
        result["status"] = status
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    print("EXPECT child_status=%d" % result["status"])
''')

db = tempdb()
proc = run([sys.executable, "-c", script], db=db)
exp = expectations(proc.stdout)
status = exp.get("child_status")
check(status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0,
      "the child's forking thread exits without a signal (status %r)" % status)
equal(scalar(db, "SELECT count(*) FROM transfers"), 1, "the parent's copy is recorded")
done()
