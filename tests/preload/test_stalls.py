"""A peer copy that never completes (SIMCUDA_P2P_HANG): the drainer writes one stalls row while the
program is stuck waiting for it, so the reason is in the database when the job is killed; a
recovery of the killed process's spool adds no second row."""
import json
import signal
import sys
import time
from harness import *

# Enables 0->1, enqueues a 1 MiB peer copy (always GPU-timed when sampling) and waits for it.
HANG_SCRIPT = r'''
import ctypes, sys
rt = ctypes.CDLL("libcudart.so.13")
SIZE = 1 << 20
def alloc(device):
    rt.cudaSetDevice(device)
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(SIZE)) == 0
    return p
a, b = alloc(0), alloc(1)
rt.cudaSetDevice(0)
assert rt.cudaDeviceEnablePeerAccess(1, 0) == 0
s = ctypes.c_void_p()
assert rt.cudaStreamCreate(ctypes.byref(s)) == 0
assert rt.cudaMemcpyPeerAsync(b, 1, a, 0, ctypes.c_size_t(SIZE), s) == 0
print("enqueued", flush=True)
rt.cudaStreamSynchronize(s)
print("never here", flush=True)
'''

db = tempdb()
env = environment(db=db, P2PGUARD_STALL_S="1", SIMCUDA_P2P_HANG="0-1")
proc = subprocess.Popen([sys.executable, "-c", HANG_SCRIPT], env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
rows = []
deadline = time.monotonic() + 20
while time.monotonic() < deadline and not rows:
    time.sleep(0.2)
    try:
        rows = query(db, "SELECT api, src_device, dst_device, bytes, path, waited_ns, rule_id, diagnosis, "
                         "advice, evidence, stream, transfer_id FROM stalls")
    except Exception:
        rows = []  # the tables may not exist yet
still_running = proc.poll() is None
proc.send_signal(signal.SIGKILL)
out, err = proc.communicate(timeout=30)
check(still_running, "the program is still stuck in cudaStreamSynchronize when the row is there")
check("never here" not in out, "the copy never completed (%r)" % out)
equal(len(rows), 1, "one stalls row, written while the program hangs")
if rows:
    api, src, dst, size, path, waited, rule, diagnosis, advice, evidence, stream, transfer = rows[0]
    equal((api, src, dst, size, path), ("cudaMemcpyPeerAsync", 0, 1, 1 << 20, "p2p"),
          "the row names the call, the pair, the bytes and the path")
    check(waited >= 1e9, "it had waited at least P2PGUARD_STALL_S=1 (%.2f s)" % (waited / 1e9))
    equal(rule, "p2p/copy-never-completes", "the knowledge base's rule for a P2P copy that never completes")
    check("IOMMU" in (diagnosis or "") and "iommu=pt" in (advice or "") and "staged" in (advice or ""),
          "diagnosis (IOMMU/ACS) and advice (iommu=pt, staged mode) are there")
    ev = json.loads(evidence)
    check(ev.get("stall_s") == 1 and ev.get("peer_access_enabled") is True,
          "the evidence is JSON with the threshold and the mapping (%s)" % evidence)
    check(stream != 0, "the stream is the program's own (%s)" % stream)
    equal(scalar(db, "SELECT gpu_ns FROM transfers WHERE id = ?", transfer), None,
          "its transfers row has no GPU time")

# The killed process's spool is imported by recovery: its records again, no second stalls row.
rec = subprocess.run([CLI, "recover", db], capture_output=True, text=True, env=environment(preload=False),
                     timeout=60)
equal(rec.returncode, 0, "p2pguard recover on the killed job's database (%s)" % rec.stderr.strip())
equal(scalar(db, "SELECT count(*) FROM stalls"), 1, "after recovery still one stalls row")
equal(scalar(db, "SELECT count(*) FROM transfers WHERE api = 'cudaMemcpyPeerAsync'"), 1,
      "and one transfers row for the copy")

# A copy that finishes in time leaves no row.
db = tempdb()
FINE = HANG_SCRIPT.replace('print("never here", flush=True)', 'print("done", flush=True)')
proc = run([sys.executable, "-c", FINE], db=db, P2PGUARD_STALL_S="1", SIMCUDA_COPY_NS_PER_BYTE="0")
check("done" in proc.stdout, "without the fault the program finishes")
equal(scalar(db, "SELECT count(*) FROM stalls"), 0, "and there is no stalls row")
done()
