"""NCCL at world size 1 through torch.distributed (scripts/gpu-parts/nccl.sh): the NCCL backend on a
FileStore, a 1 MiB all-reduce checked and (MODE time) timed, and a self send/recv if torch allows
one. Prints one JSON line.

    python3 nccl_torch.py check|time STOREFILE [ITERS]
"""
import hashlib
import json
import sys
import time

import torch
import torch.distributed as dist

mode, store_file = sys.argv[1], sys.argv[2]
iters = int(sys.argv[3]) if len(sys.argv) > 3 else 200
dev = torch.device("cuda:0")
torch.cuda.set_device(dev)
store = dist.FileStore(store_file, 1)
dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=dev)
out = {"mode": mode, "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version()))}
x = torch.arange(262144, dtype=torch.float32, device=dev)
if mode == "check":
    y = x.clone()
    dist.all_reduce(y)
    torch.cuda.synchronize()
    out["allreduce_digest"] = hashlib.sha256(y.cpu().numpy().tobytes()).hexdigest()[:16]
    try:
        r = torch.zeros_like(x)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, 0), dist.P2POp(dist.irecv, r, 0)])
        for q in reqs:
            q.wait()
        torch.cuda.synchronize()
        out["sendrecv_digest"] = hashlib.sha256(r.cpu().numpy().tobytes()).hexdigest()[:16]
        out["sendrecv_ok"] = bool(torch.equal(r, x))
    except Exception as e:  # torch may refuse a send to its own rank
        out["sendrecv_error"] = str(e).splitlines()[0][:160]
else:
    y = x.clone()
    for _ in range(20):
        dist.all_reduce(y)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(y)
    torch.cuda.synchronize()
    out["us_per_op"] = (time.perf_counter() - t0) / iters * 1e6
dist.destroy_process_group()
print(json.dumps(out), flush=True)
