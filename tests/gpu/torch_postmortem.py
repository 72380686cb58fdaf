#!/usr/bin/env python3
"""What a user meets after a job went wrong, on ONE GPU, with PyTorch (run under the guard).

  torch_postmortem.py plain   a short training loop; prints the losses' digest (compare with a bare
                              run: the guard must change nothing)
  torch_postmortem.py gil     the same loop; at step 10 a helper thread calls the runtime's
                              cudaDeviceEnablePeerAccess through ctypes.CDLL (which releases the GIL
                              around the call), asking for the device's own ordinal: the call fails
                              and its failure row must name FAIL_LINE of this file
  torch_postmortem.py segv    the same loop; at step 10 the process segfaults in Python code
                              (ctypes.string_at(0)): its crash row must be in the database at once

Prints `FAIL_LINE=N` (the line of the failing call) and `digest=...`.
"""
import ctypes
import hashlib
import os
import sys
import threading

import torch

MODE = sys.argv[1] if len(sys.argv) > 1 else "plain"
STEPS = int(os.environ.get("STEPS", "40"))


def loaded_cudart():
    """The libcudart the process already has (PyTorch's own), so the call goes to the same runtime."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "libcudart.so" in path:
                return path
    return "libcudart.so.13"


def enable_own_device(status):
    rt = ctypes.CDLL(loaded_cudart())  # CDLL: the GIL is released during the call
    status.append(rt.cudaDeviceEnablePeerAccess(torch.cuda.current_device(), 0))  # FAIL_LINE


def crash():
    ctypes.string_at(0)  # SEGV_LINE


def main():
    src = open(__file__).read().splitlines()
    fail_line = next(i + 1 for i, l in enumerate(src) if l.rstrip().endswith("# FAIL_LINE"))
    segv_line = next(i + 1 for i, l in enumerate(src) if l.rstrip().endswith("# SEGV_LINE"))
    print("FAIL_LINE=%d SEGV_LINE=%d" % (fail_line, segv_line), flush=True)
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(128, 512, device="cuda")
    target = torch.randint(0, 10, (128,), device="cuda")
    digest = hashlib.sha256()
    for step in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(data), target)
        loss.backward()
        opt.step()
        digest.update(loss.detach().cpu().numpy().tobytes())
        if step == 10 and MODE == "gil":
            status = []
            t = threading.Thread(target=enable_own_device, args=(status,), name="peer-helper")
            t.start()
            t.join()
            print("enable_status=%d" % status[0], flush=True)
        if step == 10 and MODE == "segv":
            crash()
    print("digest=%s" % digest.hexdigest()[:16], flush=True)


if __name__ == "__main__":
    main()
