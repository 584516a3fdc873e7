"""One mp.spawn rank fails: the report blames the rank's own line, not the mp.spawn call."""
import torch
import torch.multiprocessing as mp


def load_shard(rank):
    if rank == 1:
        raise ValueError(f"shard {rank} is missing")  # MARK: raise
    return torch.ones(4).cuda()


def work(rank):
    shard = load_shard(rank)  # MARK: call
    print("rank", rank, shard.sum().item())


if __name__ == "__main__":
    mp.spawn(work, nprocs=2)  # MARK: spawn
