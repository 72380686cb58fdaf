#!/usr/bin/env python3
"""A failing peer call through ctypes.CDLL, which releases the GIL around every call: the guard's
failure row must still name this file's FAIL_LINE. Runs on one GPU (or the simulated CUDA)."""
import ctypes
import sys


def enable_own_device(rt):
    return rt.cudaDeviceEnablePeerAccess(0, 0)  # FAIL_LINE


def main():
    rt = ctypes.CDLL("libcudart.so.13")
    if rt.cudaSetDevice(0) != 0:
        sys.exit("cudaSetDevice failed")
    src = open(__file__).read().splitlines()
    line = next(i + 1 for i, l in enumerate(src) if l.rstrip().endswith("# FAIL_LINE"))
    print("FAIL_LINE=%d status=%d" % (line, enable_own_device(rt)), flush=True)


if __name__ == "__main__":
    main()
