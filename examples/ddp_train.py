"""Data-parallel training with DDP over NCCL, one process per GPU.

Launch with `torchrun --nproc-per-node N examples/ddp_train.py`; run as a plain
script it is a world of one process (the environment defaults below). Written
for CUDA only (NCCL, `torch.cuda.set_device`, `CUDA_VISIBLE_DEVICES`,
`device_ids`); `neuron-check --fix` makes it run on any backend, with gloo on
the CPU.

    python examples/ddp_train.py --steps 2
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
for key, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29517"}.items():
    os.environ.setdefault(key, value)


def make_model():
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))


def get_model_and_inputs():
    """The (undistributed) model and one batch on the CPU, for the runtime checker."""
    torch.manual_seed(0)
    return make_model(), (torch.randn(8, 16),)


def setup() -> int:
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl")
    return local_rank


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args(argv)

    local_rank = setup()
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = make_model().cuda(local_rank)
    ddp = DDP(model, device_ids=[local_rank], output_device=local_rank)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(rank)
    target = torch.randn(16, 4, generator=torch.Generator().manual_seed(1234))
    loss = torch.zeros(())
    for step in range(args.steps):
        x = torch.randn(args.batch, 16, generator=gen).cuda(local_rank, non_blocking=True)
        y = x @ target.cuda(local_rank)
        loss = nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if rank == 0:
            print(f"step {step:3d}  loss {mean.item() / world:.4f}")
    dist.destroy_process_group()
    return loss.item()


if __name__ == "__main__":
    main()
