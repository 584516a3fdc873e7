"""Data-parallel training of the tiny stack (conformance/dist/training.py), shared by the ways
that shard its parameters over every rank (`parity.dcp`'s FSDP2 run, `parity.simple_fsdp`).

Each rank trains on its rows of every batch; the whole batch's loss is the mean of the ranks'
losses (equal row counts, a mean loss), averaged on the CPU group so every rank judges the same
value, and the gradients the sharding reduces are the whole batch's, as in the CPU reference.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from conformance.dist import training
from conformance.outcome import classify_exception, describe_exception
from op_db.records import Result, Status, WorkItem, shorten

_MISSING = re.compile(r"does not support (\w+)")  # c10d's words for a collective a backend lacks


def rows(rank: int, world_size: int) -> slice:
    per = training.BATCH // world_size
    return slice(rank * per, (rank + 1) * per)


def not_applicable(world_size: int) -> str | None:
    """Why the batch cannot be split over this world (a SKIP's reason), or None."""
    if training.BATCH % world_size:
        return f"a batch of {training.BATCH} does not split over {world_size} ranks."
    return None


def mesh(rctx: Any) -> Any:
    """The 1-D mesh of the whole world on this rank's device type."""
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(rctx.device.split(":", 1)[0], (rctx.world_size,))


def train(model: torch.nn.Module, rctx: Any, forward: Callable[[torch.Tensor], torch.Tensor] | None = None,
          steps: int = training.STEPS) -> list[torch.Tensor]:
    """`steps` SGD steps of `model` (already on the device and sharded) on this rank's rows;
    the whole batch's loss of each step, on the CPU in float64. `forward` replaces `model`'s
    call (a compiled one)."""
    forward = forward or model
    optimizer = torch.optim.SGD(model.parameters(), lr=training.LR)
    chosen = rows(rctx.rank, rctx.world_size)
    losses = []
    for ids, targets in training.batches(rctx.seed)[:steps]:
        optimizer.zero_grad()
        loss = training.loss_fn(forward(ids[chosen].to(rctx.device)), targets[chosen].to(rctx.device))
        loss.backward()
        value = loss.detach().cpu().double().reshape(1)
        dist.all_reduce(value, group=rctx.cpu_group)
        losses.append(value[0] / rctx.world_size)
        optimizer.step()
    return losses


def failure(item: WorkItem, exc: BaseException, started: float, doing: str) -> Result:
    """A missing collective is UNSUPPORTED naming it; any other failure as outcome.py says."""
    text = describe_exception(exc)
    missing = _MISSING.search(str(exc))
    status, extra = classify_exception(exc), {}
    if missing is not None:
        status, extra = Status.UNSUPPORTED, {"missing_collective": missing.group(1)}
        text = f"{doing} needs {missing.group(1)}, which this process group lacks: {text}"
    return Result.for_item(item, status, samples=1, message=shorten(f"{doing}: {text}" if not extra else text),
                           duration_s=time.perf_counter() - started, extra=extra)
