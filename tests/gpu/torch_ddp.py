#!/usr/bin/env python3
"""DDP over NCCL, one process per GPU (torchrun --nproc_per_node=2). Prints the final loss and what
NCCL was told about P2P."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(rank)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
x = torch.randn(64, 512, device="cuda")
y = torch.randint(0, 10, (64,), device="cuda")
for _ in range(50):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(ddp(x), y)
    loss.backward()
    opt.step()
t = torch.ones(1, device="cuda")
dist.all_reduce(t)
print("RANK %d loss=%.6f allreduce=%d NCCL_P2P_DISABLE=%s" % (rank, loss.item(), int(t.item()),
                                                             os.environ.get("NCCL_P2P_DISABLE", "unset")))
dist.destroy_process_group()
