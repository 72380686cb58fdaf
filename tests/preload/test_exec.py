"""exec: a process that records, then replaces itself with another guarded program. Both images
are processes of their own in the log (same pid), and nothing recorded before the exec is lost:
the new image's guard imports the spool the old one left (its lock went with the exec)."""
import sys
from harness import *

script = r'''
import ctypes, os, sys
rt = ctypes.PyDLL("libcudart.so.13")
ptrs = []
for dev in (0, 1):
    rt.cudaSetDevice(dev)
    p = ctypes.c_void_p()
    rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(4096))
    ptrs.append(p)
for _ in range(2):
    assert rt.cudaMemcpyPeer(ptrs[1], 1, ptrs[0], 0, ctypes.c_size_t(4096)) == 0
sys.stdout.flush()
os.execv(sys.argv[1], [sys.argv[1], "basic"])
'''
db = tempdb()
proc = run([sys.executable, "-c", script, program("rt_peer")], db=db)
exp = expectations(proc.stdout)
rows = query(db, "SELECT pid, count(*) FROM processes GROUP BY pid")
equal(len(rows), 1, "one pid")
equal(rows[0][1] if rows else 0, 2, "two process rows for it: before and after the exec")
equal(scalar(db, "SELECT count(*) FROM transfers"), 2 + exp["transfers"],
      "the copies before the exec and after it are all there")
done()
