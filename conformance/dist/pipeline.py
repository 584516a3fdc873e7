"""Pipeline-parallel training parity (`parity.pp_gpipe`, `parity.pp_1f1b`, `parity.pp_interleaved`):
the tiny stack of conformance/dist/training.py cut into stages with `torch.distributed.pipelining`
and trained by the schedule on the device, judged against the whole model on the CPU.

GPipe and 1F1B put one stage on each rank; Interleaved1F1B puts STAGES_PER_RANK (2) on each, rank
r holding stages r and r + world (the loop layout the schedule expects). Each step's loss is the
last stage's mean over the microbatches (the schedule scales the gradients by the microbatch
count, so they are the whole batch's), shared with every rank on the CPU group. A pipeline moves
activations and gradients with send/recv only: a process group that lacks them is UNSUPPORTED
naming them. The variant `train2` uses MICROBATCHES microbatches; `train2.mbN` asks for N, and a
count that does not split the batch evenly is SKIP (the stages are shaped for one microbatch
size: the schedule would send one shape and the peer wait for another).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from conformance.dist import training
from conformance.outcome import classify_exception, describe_exception
from op_db.records import Result, Status, WorkItem, shorten

SCHEDULES = {"pp_gpipe": ("ScheduleGPipe", 1), "pp_1f1b": ("Schedule1F1B", 1),
             "pp_interleaved": ("ScheduleInterleaved1F1B", 2)}
MICROBATCHES = 4
POINT_TO_POINT = ("send", "recv")


def microbatches(variant: str) -> int:
    """`train2` -> MICROBATCHES, `train2.mbN` -> N."""
    _, _, count = variant.partition(".mb")
    return int(count) if count.isdigit() else MICROBATCHES


def stage_pieces(stage: int, stages: int) -> range:
    """Which of the model's pieces stage `stage` of `stages` holds: the blocks split evenly, the
    embedding with the first stage and the head with the last."""
    count = training.BLOCKS + 2
    per, extra = divmod(count, stages)
    start = stage * per + min(stage, extra)
    return range(start, start + per + (stage < extra))


def not_applicable(way: str, item: WorkItem, world_size: int, ranks: int | None = None,
                   batch: int = training.BATCH) -> str | None:
    """Why this pipeline cannot run here (a SKIP's reason), or None: over `ranks` of the world
    (all by default), each step's `batch` rows split into the variant's microbatches."""
    ranks = world_size if ranks is None else ranks
    stages = ranks * SCHEDULES[way][1]
    count = microbatches(item.variant)
    if ranks < 2:
        return "pipeline parallel needs a world of 2 ranks or more."
    if stages > training.BLOCKS + 2:
        return f"{stages} stages are more than the model's {training.BLOCKS + 2} pieces."
    if count < 1 or batch % count:
        return (f"{count} microbatches do not split a batch of {batch} evenly; the stages are shaped "
                "for one microbatch size.")
    if way == "pp_interleaved" and count % ranks:
        return f"Interleaved1F1B needs the microbatch count ({count}) to be a multiple of the {ranks} ranks."
    return None


def build_schedule(way: str, parts: list[Any], rank: int, ranks: int, device: str, group: Any, count: int,
                   wrap: Callable[[Any], Any] | None = None):
    """The schedule over this rank's stages of the model `parts`, and those stages' modules.
    `rank` and `ranks` are this rank's place in the pipeline `group` (None: the whole world);
    `wrap`, when given, wraps each stage's module (FSDP2 for PP+FSDP) before its stage is built."""
    from torch.distributed import pipelining

    name, per_rank = SCHEDULES[way]
    stages = ranks * per_rank
    indices = [rank + k * ranks for k in range(per_rank)]
    modules = [training.chunk(parts, stage_pieces(i, stages)).to(device) for i in indices]
    if wrap is not None:
        modules = [wrap(m) for m in modules]
    built = [pipelining.PipelineStage(m, i, stages, torch.device(device), group=group)
             for m, i in zip(modules, indices)]
    schedule_type = getattr(pipelining, name)
    schedule = schedule_type(built if per_rank > 1 else built[0], n_microbatches=count, loss_fn=training.loss_fn)
    first, last = 0 in indices, stages - 1 in indices
    return schedule, modules, first, last


def train(schedule: Any, modules: list[Any], first: bool, last: bool, device: str, seed: int,
          cpu_group: Any, pipelines: int = 1, rows: slice = slice(None)) -> training.Run:
    """STEPS steps of the schedule over this pipeline's `rows` of each batch. Each step's loss is
    the mean over the `pipelines` (data-parallel replicas of the pipeline) of their last stage's
    mean over the microbatches, summed over the CPU group so every rank judges the whole batch's."""
    params = [p for m in modules for p in m.parameters()]
    optimizer = torch.optim.SGD(params, lr=training.LR)
    losses = []
    for ids, targets in training.batches(seed):
        optimizer.zero_grad()
        out: list[torch.Tensor] = []
        args = (ids[rows].to(device),) if first else ()
        schedule.step(*args, target=targets[rows].to(device) if last else None, losses=out if last else None)
        value = torch.stack([v.detach().cpu().double() for v in out]).mean() if last else torch.zeros((),
                                                                                                    dtype=torch.float64)
        value = value.reshape(1)
        dist.all_reduce(value, group=cpu_group)  # only last stages add to it
        losses.append(value[0] / pipelines)
        optimizer.step()
    combined = torch.nn.ModuleList(modules)
    run = training.snapshot(losses, combined)
    strip = lambda d: {name.split(".", 1)[1]: v for name, v in d.items()}  # noqa: E731 - "0." of the list
    return training.Run(run.losses, strip(run.grads), strip(run.weights))


def unsupported_point_to_point(exc: BaseException) -> str | None:
    """The point-to-point collective a failure says the backend lacks, if it says so."""
    text = str(exc)
    return next((op for op in POINT_TO_POINT if f"does not support {op}" in text), None)


def failure(item: WorkItem, exc: BaseException, started: float) -> Result:
    missing = unsupported_point_to_point(exc)
    if missing is not None:
        message = (f"pipeline parallel needs point-to-point {missing} (send/recv), which this process group lacks: "
                   f"{describe_exception(exc)}")
        return Result.for_item(item, Status.UNSUPPORTED, samples=1, message=shorten(message),
                               duration_s=time.perf_counter() - started, extra={"missing_collective": missing})
    return Result.for_item(item, classify_exception(exc), samples=1, message=shorten(describe_exception(exc)),
                           duration_s=time.perf_counter() - started)


def run_item(item: WorkItem, rctx: Any) -> Result:
    way = item.subject.split(".", 1)[1]
    reason = not_applicable(way, item, rctx.world_size)
    if reason is not None:
        return Result.for_item(item, Status.SKIP, message=reason)
    started = time.perf_counter()
    dtype = getattr(torch, item.dtype)
    parts = [p.to(dtype) for p in training.pieces(rctx.seed)]
    with rctx.adapter.track_fallbacks() as fallbacks:
        try:
            schedule, modules, first, last = build_schedule(way, parts, rctx.rank, rctx.world_size, rctx.device,
                                                            None, microbatches(item.variant))
            dev = train(schedule, modules, first, last, rctx.device, rctx.seed, rctx.cpu_group)
            rctx.adapter.synchronize()
        except Exception as exc:  # noqa: BLE001 - the backend failed the pipeline
            return failure(item, exc, started)
    return training.verdict(item, dev, rctx.seed, sorted(fallbacks.ops), started)
