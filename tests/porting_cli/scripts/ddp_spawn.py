"""A 2-rank DDP training script written for CUDA + NCCL, launched with mp.spawn."""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def train(rank, world_size, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("nccl", rank=rank, world_size=world_size)  # MARK: init
    torch.cuda.set_device(rank)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(rank)  # MARK: to_rank
    ddp = DDP(model, device_ids=[rank])  # MARK: ddp
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for step in range(5):
        x = torch.randn(4, 8).cuda(rank)  # MARK: batch
        loss = ddp(x).pow(2).mean()  # MARK: forward
        loss.backward()  # MARK: backward
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    world_size = 2
    mp.spawn(train, args=(world_size, free_port()), nprocs=world_size, join=True)  # MARK: spawn
    print("all ranks done")
