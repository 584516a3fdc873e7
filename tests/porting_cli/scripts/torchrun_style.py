"""torchrun-style launch: the script starts itself as 2 workers with LOCAL_RANK, RANK,
WORLD_SIZE and MASTER_* in the environment, as torchrun does; each worker asks for NCCL."""
import os
import socket
import subprocess
import sys

import torch
import torch.distributed as dist


def worker():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)  # MARK: set_device
    dist.init_process_group(backend="nccl")  # MARK: init
    device = torch.device("cuda", local_rank)
    model = torch.nn.Linear(4, 4).to(device)  # MARK: model
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(4):
        loss = model(torch.randn(2, 4, device=device)).sum()  # MARK: forward
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)  # MARK: all_reduce
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    if "LOCAL_RANK" in os.environ:
        worker()
    else:
        with socket.create_server(("127.0.0.1", 0)) as probe:  # a free port for the rendezvous
            port = str(probe.getsockname()[1])
        workers = [subprocess.Popen([sys.executable, __file__],
                                    env=dict(os.environ, LOCAL_RANK=str(r), RANK=str(r), WORLD_SIZE="2",
                                             MASTER_ADDR="127.0.0.1", MASTER_PORT=port))
                   for r in range(2)]
        print("workers exited", [w.wait() for w in workers])
