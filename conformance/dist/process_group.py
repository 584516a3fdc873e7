"""Which c10d backend a device's process groups use, and how a rank joins its world."""

from __future__ import annotations

import dataclasses
import os
from datetime import timedelta
from typing import Any

from op_db.errors import InputError

# Adapter name -> c10d backend. A plugin adapter may name its own with a `dist_backend` attribute.
PROCESS_GROUP_BACKENDS = {
    "sim": "sim",  # conformance/sim/c10d.py: gloo underneath, with collective_faults
    "neuron": "neuron",  # TorchNeuron's own c10d backend
    "cuda": "nccl",
    "xpu": "xccl",
    "hpu": "hccl",
    "npu": "hccl",
    "cpu": "gloo",
}
# Devices whose ranks all share one device of this host (they are processes over the CPU).
HOST_DEVICES = frozenset({"sim", "cpu"})
# Ranks per core a host may run of a host device: more only time-slice the same cores.
RANKS_PER_CORE = 4


@dataclasses.dataclass(frozen=True)
class RankPlace:
    """Where one rank runs: its rank, the world size and its device string."""

    rank: int
    world_size: int
    device: str


def backend_for(adapter: Any) -> str:
    found = getattr(adapter, "dist_backend", None) or PROCESS_GROUP_BACKENDS.get(adapter.name)
    if found is None:
        raise InputError(f"device {adapter.name!r} names no torch.distributed backend, so `dist` cannot run on it.")
    return found


def max_world_size(adapter: Any) -> int:
    """How many ranks the backend and host offer: one per device, or for a host device a few per core."""
    if adapter.name in HOST_DEVICES:
        return RANKS_PER_CORE * (os.cpu_count() or 1)
    return adapter.device_count()


def check_world_size(world_size: int, adapter: Any, on_this_host: bool = True) -> None:
    """InputError for a world below 1 rank, or (on this host) above what it offers; a Ray
    cluster's room is checked once it is reached."""
    if world_size < 1:
        raise InputError(f"--world-size must be at least 1, not {world_size}.")
    limit = max_world_size(adapter)
    if on_this_host and world_size > limit:
        what = "this host runs" if adapter.name in HOST_DEVICES else f"device {adapter.name!r} has"
        raise InputError(f"--world-size {world_size} is more ranks than {what} ({limit}).")


def rank_device(adapter: Any, device: str, rank: int) -> str:
    """One device per rank on a real backend (cuda:0, cuda:1, ...); host devices are shared."""
    if adapter.name in HOST_DEVICES or adapter.device_count() <= 1:
        return device
    return adapter.device(rank)


def join_world(adapter: Any, store: Any, place: RankPlace, timeout_s: float) -> Any:
    """init_process_group with the device's backend on `store` (a c10d Store: the local runner's
    FileStore, the Ray runner's TCPStore); returns the CPU gloo group every rank also joins, on
    which the references run."""
    import torch.distributed as dist

    timeout = timedelta(seconds=timeout_s)
    dist.init_process_group(backend=backend_for(adapter), store=store, rank=place.rank,
                            world_size=place.world_size, timeout=timeout)
    return dist.new_group(backend="gloo", timeout=timeout)
