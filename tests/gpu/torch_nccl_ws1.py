#!/usr/bin/env python3
"""torch.distributed with NCCL at world size 1: start-up (init_process_group to the first
all-reduce done) and step time (a few all-reduces of 64 MiB). NCCL allocates its buffers with
cuMem where the driver supports it (NCCL_CUMEM_ENABLE auto): a single process maps only its own
memory, which the guard counts.

    torch_nccl_ws1.py    prints RESULT value=... start_s=... step_ms=...
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
torch.cuda.set_device(0)
t0 = time.perf_counter()
dist.init_process_group("nccl", rank=0, world_size=1)
x = torch.ones(16 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
start = time.perf_counter() - t0
steps = []
for _ in range(10):
    a = time.perf_counter()
    dist.all_reduce(x)
    torch.cuda.synchronize()
    steps.append((time.perf_counter() - a) * 1e3)
value = float(x[0].item())
dist.destroy_process_group()
print("RESULT value=%.1f start_s=%.3f step_ms=%.3f" % (value, start, statistics.median(steps)))
sys.exit(0)
