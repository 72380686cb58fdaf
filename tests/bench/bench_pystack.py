#!/usr/bin/env python3
"""The cost of the guard's Python stack capture (failure rows; crash rows use the same reader).

    python3 tests/bench/bench_pystack.py [BUILD_DIR] [ITERATIONS]

Calls the capture from a Python stack of the given depths, through ctypes.CDLL (GIL released, as
PyTorch and ctypes calls are) and ctypes.PyDLL (GIL held), and prints microseconds per capture: wall
clock, and the thread's CPU time (system calls included), which a busy machine disturbs less. The
stack is one function recursing ("same": its frames share one code object) or as many different
functions ("distinct"), which is what a real program's stack looks like. How it is read depends on
the interpreter: its traceback writer (3.8-3.12 where the build exports it), the walk by the debug
offsets (3.13, 3.14), or the frame API (GIL held only).
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


# The same depth through different functions, each its own code object (and line table).
_chain = {}
exec("\n".join("def f%d(fn):\n    return f%d(fn)" % (k, k + 1) for k in range(200))
     + "\ndef f200(fn):\n    return fn()\n", _chain)


def distinct(depth, fn):
    """fn() called with depth Python frames on the stack, all but two of different functions."""
    return _chain["f%d" % (200 - (depth - 3))](fn) if depth > 2 else fn()


rows = []
for loader, gil in ((ctypes.CDLL, "released"), (ctypes.PyDLL, "held")):
    lib = loader(path)
    lib.bench_python_stack.restype = ctypes.c_double
    lib.bench_python_stack.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                       ctypes.POINTER(ctypes.c_double)]
    for shape, call in (("same", at_depth), ("distinct", distinct)):
        for depth in (5, 40, 100):
            frames, cpu = ctypes.c_int(), ctypes.c_double()
            args = (ctypes.byref(frames), ctypes.byref(cpu))
            call(depth, lambda: lib.bench_python_stack(50, 0, *args))  # warm up
            ns = call(depth, lambda: lib.bench_python_stack(iterations, 0, *args))
            rows.append((gil, shape, depth, frames.value, ns / 1000.0, cpu.value / 1000.0))

print("Python %s, %d captures each" % (sys.version.split()[0], iterations))
print("%-10s %-9s %6s %8s %12s %14s" % ("GIL", "functions", "depth", "frames", "us/capture",
                                        "CPU us/capture"))
for gil, shape, depth, frames, us, cpu_us in rows:
    print("%-10s %-9s %6d %8d %12.1f %14.1f" % (gil, shape, depth, frames, us, cpu_us))
