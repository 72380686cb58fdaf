"""NCCL at world size 1 through CuPy (scripts/gpu-parts/nccl.sh): a self send/recv in a group and an
all-reduce, checked, then (MODE time) a timed loop. Prints one JSON line.

    python3 nccl_cupy.py check|time-sendrecv|time-allreduce [ITERS]
"""
import hashlib
import json
import sys
import time

import cupy
from cupy.cuda import nccl

mode = sys.argv[1] if len(sys.argv) > 1 else "check"
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 200
N = 262144  # 1 MiB of float32

cupy.cuda.Device(0).use()
stream = cupy.cuda.Stream(non_blocking=True)
comm = nccl.NcclCommunicator(1, nccl.get_unique_id(), 0)
src = cupy.arange(N, dtype=cupy.float32)
dst = cupy.zeros(N, dtype=cupy.float32)
red = cupy.zeros(N, dtype=cupy.float32)


def sendrecv():
    nccl.groupStart()
    comm.send(src.data.ptr, N, nccl.NCCL_FLOAT32, 0, stream.ptr)
    comm.recv(dst.data.ptr, N, nccl.NCCL_FLOAT32, 0, stream.ptr)
    nccl.groupEnd()


def allreduce():
    comm.allReduce(src.data.ptr, red.data.ptr, N, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr)


out = {"nccl": nccl.get_version(), "mode": mode}
if mode == "check":
    for _ in range(5):
        sendrecv()
    allreduce()
    stream.synchronize()
    out["sendrecv_digest"] = hashlib.sha256(cupy.asnumpy(dst).tobytes()).hexdigest()[:16]
    out["allreduce_digest"] = hashlib.sha256(cupy.asnumpy(red).tobytes()).hexdigest()[:16]
    out["sendrecv_ok"] = bool((dst == src).all())
else:
    op = sendrecv if mode == "time-sendrecv" else allreduce
    for _ in range(20):
        op()
    stream.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        op()
    stream.synchronize()
    out["us_per_op"] = (time.perf_counter() - t0) / iters * 1e6
comm.destroy()
print(json.dumps(out), flush=True)
