#!/usr/bin/env python3
"""The cost of the guard's Python stack capture (failure rows; crash rows use the same writer).

    python3 tests/bench/bench_pystack.py [BUILD_DIR] [ITERATIONS]

Calls the capture from a Python stack of the given depths, through ctypes.CDLL (GIL released, as
PyTorch and ctypes calls are) and ctypes.PyDLL (GIL held), and prints microseconds per capture: wall clock, and the thread's CPU time
(system calls included), which a busy machine disturbs less.
"""
import ctypes
import os
import sys

build = sys.argv[1] if len(sys.argv) > 1 else "build"
iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
path = os.path.join(build, "tests/bench/libbench_pystack.so")


def at_depth(depth, fn):
    """fn() called with depth Python frames on the stack (this one and the module's included)."""
    if depth <= 2:
        return fn()
    return at_depth(depth - 1, fn)


rows = []
for loader, gil in ((ctypes.CDLL, "released"), (ctypes.PyDLL, "held")):
    lib = loader(path)
    lib.bench_python_stack.restype = ctypes.c_double
    lib.bench_python_stack.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                       ctypes.POINTER(ctypes.c_double)]
    for depth in (5, 40, 100):
        frames, cpu = ctypes.c_int(), ctypes.c_double()
        args = (ctypes.byref(frames), ctypes.byref(cpu))
        at_depth(depth, lambda: lib.bench_python_stack(50, 0, *args))  # warm up
        ns = at_depth(depth, lambda: lib.bench_python_stack(iterations, 0, *args))
        rows.append((gil, depth, frames.value, ns / 1000.0, cpu.value / 1000.0))

print("Python %s, %d captures each" % (sys.version.split()[0], iterations))
print("%-10s %6s %8s %12s %14s" % ("GIL", "depth", "frames", "us/capture", "CPU us/capture"))
for gil, depth, frames, us, cpu_us in rows:
    print("%-10s %6d %8d %12.1f %14.1f" % (gil, depth, frames, us, cpu_us))
