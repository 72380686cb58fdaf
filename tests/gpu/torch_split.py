#!/usr/bin/env python3
"""A small model split over two GPUs: activations cross to cuda:1 in forward, gradients cross back
in backward, every step. Prints the losses' digest (to compare runs bit for bit), the median step
time, and what the guard must have recorded."""
import hashlib
import os
import statistics
import sys
import time

import torch

STEPS = int(os.environ.get("STEPS", "200"))
# The default is launch-bound (about 1.4 ms a step on the H200 pair); BATCH=2048 WIDTH=4096 makes
# the GPUs the bottleneck (the size the overhead comparison also runs at).
BATCH = int(os.environ.get("BATCH", "256"))
WIDTH = int(os.environ.get("WIDTH", "1024"))

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


class Split(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.front = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()).to("cuda:0")
        self.back = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(),
                                        torch.nn.Linear(WIDTH, 10)).to("cuda:1")

    def forward(self, x):
        return self.back(self.front(x).to("cuda:1"))


model = Split()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(BATCH, WIDTH, device="cuda:0")
target = torch.randint(0, 10, (BATCH,), device="cuda:1")
losses, times = [], []
for step in range(STEPS):
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(data), target)
    loss.backward()
    opt.step()
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    times.append(time.perf_counter() - t0)
    losses.append(loss.item())
digest = hashlib.sha256(torch.tensor(losses, dtype=torch.float64).numpy().tobytes()).hexdigest()[:16]
print("LOSSES first=%.6f last=%.6f digest=%s" % (losses[0], losses[-1], digest))
steady = sorted(times[10:])
print("STEP median_ms=%.4f p10_ms=%.4f p90_ms=%.4f" % (statistics.median(steady) * 1e3,
                                                       steady[len(steady) // 10] * 1e3,
                                                       steady[len(steady) * 9 // 10] * 1e3))
print("EXPECT cross_copies=%d bytes_per_copy=%d" % (2 * STEPS, BATCH * WIDTH * 4))
