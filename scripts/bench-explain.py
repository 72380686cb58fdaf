#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What one `p2pguard explain "<line>"` costs, as a user runs it: a whole process each time (start,
the built-in rules read, the line explained, the answer printed), CPU time from getrusage over N
runs, and the wall clock. `p2pguard --version` is the floor: a process that starts and reads no
rule. Prints one table.

    scripts/bench-explain.py [P2PGUARD] [RUNS]     (defaults: build/src/cli/p2pguard, 200)
"""
import os
import resource
import subprocess
import sys
import time

LINES = [
    ("a status name", "cudaErrorPeerAccessUnsupported"),
    ("an NCCL warning", "NCCL WARN Cuda failure 'peer access is not supported between these two devices'"),
    ("a PyTorch error",
     "RuntimeError: CUDA error: peer mapping resources exhausted\nCUDA kernel errors might be "
     "asynchronously reported at some other API call, so the stacktrace below might be incorrect."),
    ("a line no rule explains", "Segmentation fault (core dumped)"),
]


def cost(argv, runs):
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # warm the page cache
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    for _ in range(runs):
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = (time.monotonic() - t0) / runs
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / runs
    return cpu * 1000, wall * 1000


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/src/cli/p2pguard"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    if not os.access(binary, os.X_OK):
        sys.exit("bench-explain.py: %s is not an executable (build first)" % binary)
    print("bench-explain: %s, %d runs each, load %.2f" % (binary, runs, os.getloadavg()[0]))
    print("| command | CPU ms a run | wall ms a run |")
    print("|---|---|---|")
    cpu, wall = cost([binary, "--version"], runs)
    print("| `p2pguard --version` (start, no rules) | %.2f | %.2f |" % (cpu, wall))
    for what, line in LINES:
        cpu, wall = cost([binary, "explain", line], runs)
        print("| `p2pguard explain` %s | %.2f | %.2f |" % (what, cpu, wall))


if __name__ == "__main__":
    main()
