#!/usr/bin/env python3
"""CuPy copying an array from GPU 0 to GPU 1."""
import cupy as cp

with cp.cuda.Device(0):
    x = cp.arange(1 << 20, dtype=cp.float32)
with cp.cuda.Device(1):
    y = cp.asarray(x)  # a peer copy
    y2 = cp.empty_like(y)
    y2.data.copy_from_device(x.data, x.nbytes)
    cp.cuda.Device(1).synchronize()
    ok = bool((y == y2).all()) and bool((cp.asnumpy(y) == cp.asnumpy(x)).all())
print("CUPY moved_bytes=%d correct=%s" % (2 * x.nbytes, ok))
