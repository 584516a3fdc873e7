"""Pipeline parallel with FSDP2 on a 2-D mesh (`parity.pp_fsdp`): the tiny stack of
conformance/dist/training.py cut into 2 pipeline stages over the mesh's first axis (`pp`), each
stage's module `fully_shard`ed over its second axis (`dp`), trained by Schedule1F1B on the device
and judged against the whole model on the CPU, as the pipelines are (conformance/dist/pipeline.py).

The world of N ranks (even, 4 or more) is a (2, N / 2) mesh, rank r at (r // (N / 2), r % (N / 2)):
the ranks with the same `dp` coordinate form one pipeline (its send/recv go over the `pp` group),
and the ranks with the same `pp` coordinate hold one stage, sharded among them (its all-gathers
and reduce-scatters go over the `dp` group). Each pipeline trains on its share of the batch
(data parallel over `dp`, MICROBATCHES microbatches); a step's loss is the mean of the pipelines'
last-stage losses, the whole batch's. Each rank judges the stage it holds, parameters gathered
whole; the worst rank speaks for the item. A collective the process group refuses (send/recv for
the pipeline, all-gather or reduce-scatter for FSDP2) is UNSUPPORTED naming it.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from conformance.dist import data_parallel, mlp_stack, pipeline, training
from op_db.records import Result, Status, WorkItem

WAY = "pp_fsdp"
SCHEDULE = "pp_1f1b"  # the pipeline schedule a PP+FSDP run uses (pipeline.SCHEDULES)
PIPELINE_STAGES = 2
NEEDS = "pipeline parallel with FSDP2 (PP+FSDP)"  # what a missing collective's message says needs it


def replicas(world_size: int) -> int:
    """How many pipelines (the `dp` axis) a world holds."""
    return world_size // PIPELINE_STAGES


def not_applicable(item: WorkItem, world_size: int) -> str | None:
    """Why PP+FSDP cannot run in this world (a SKIP's reason), or None."""
    if world_size < 2 * PIPELINE_STAGES or world_size % PIPELINE_STAGES:
        return (f"pipeline parallel with FSDP2 needs an even world of {2 * PIPELINE_STAGES} ranks or more "
                f"({PIPELINE_STAGES} pipeline stages, each sharded over 2 ranks or more).")
    dp = replicas(world_size)
    if training.BATCH % dp:
        return f"a batch of {training.BATCH} does not split over {dp} pipelines."
    return pipeline.not_applicable(SCHEDULE, item, world_size, PIPELINE_STAGES, training.BATCH // dp)


def run_item(item: WorkItem, rctx: Any) -> Result:
    reason = not_applicable(item, rctx.world_size)
    if reason is not None:
        return Result.for_item(item, Status.SKIP, message=reason)
    started = time.perf_counter()
    dtype = getattr(torch, item.dtype)
    parts = [p.to(dtype) for p in training.pieces(rctx.seed)]
    dp = replicas(rctx.world_size)
    stage, replica = divmod(rctx.rank, dp)
    with rctx.adapter.track_fallbacks() as fallbacks:
        try:
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard

            mesh = init_device_mesh(rctx.device.split(":", 1)[0], (PIPELINE_STAGES, dp), mesh_dim_names=("pp", "dp"))

            def shard(module: torch.nn.Module) -> torch.nn.Module:
                for piece in module:  # each piece (embedding, block, head), then the stage's root
                    fully_shard(piece, mesh=mesh["dp"])
                return fully_shard(module, mesh=mesh["dp"])

            schedule, modules, first, last = pipeline.build_schedule(
                SCHEDULE, parts, stage, PIPELINE_STAGES, rctx.device, mesh["pp"].get_group(),
                pipeline.microbatches(item.variant), wrap=shard)
            dev = pipeline.train(schedule, modules, first, last, rctx.device, rctx.seed, rctx.cpu_group,
                                 pipelines=dp, rows=data_parallel.rows(replica, dp))
            rctx.adapter.synchronize()
        except Exception as exc:  # noqa: BLE001 - the backend failed the pipeline or its sharding
            # A missing collective may be the pipeline's (send/recv) or FSDP2's: named either way.
            return mlp_stack.failure(item, exc, started, NEEDS)
    return training.verdict(item, dev, rctx.seed, sorted(fallbacks.ops), started)
