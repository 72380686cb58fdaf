#!/usr/bin/env python3
"""torch.multiprocessing CUDA tensor sharing: the parent sends a CUDA tensor to a spawned child,
which sums it on the GPU, writes into it, and sends the sum back; the parent checks both. With
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True the tensor travels as cuMem POSIX fds taken with
pidfd_getfd (PyTorch's ExpandableSegment::fromShared); otherwise as a legacy IPC handle.

    torch_ipc_share.py    prints RESULT sum=... written=... ok=1, or the receiver's error
"""
import os
import sys

import torch
import torch.multiprocessing as mp


def receiver(queue, back):
    try:
        t = queue.get(timeout=60)
        s = float(t.sum().item())
        t.add_(1)
        torch.cuda.synchronize()
        back.put(("ok", s))
    except Exception as e:  # the error a user would see, e.g. pidfd_getfd: Operation not permitted
        back.put(("error", "%s: %s" % (type(e).__name__, e)))


def main():
    mp.set_start_method("spawn")
    t = torch.arange(1 << 20, dtype=torch.float32, device="cuda:0")
    expected = float(t.sum().item())
    queue, back = mp.Queue(), mp.Queue()
    child = mp.Process(target=receiver, args=(queue, back))
    child.start()
    queue.put(t)
    status, value = back.get(timeout=120)
    child.join()
    if status != "ok":
        print("RESULT error=%r alloc_conf=%s" % (value, os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")))
        return 1
    written = float(t.sum().item()) - expected
    ok = value == expected and written == float(t.numel())
    print("RESULT sum=%.1f written=%.1f ok=%d alloc_conf=%s" % (value, written, int(ok),
                                                               os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
