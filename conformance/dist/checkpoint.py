"""Distributed checkpoint parity (`parity.dcp`): the tiny stack of conformance/dist/training.py
trained with FSDP2 on the device, saved by `torch.distributed.checkpoint` as a sharded state dict
(one file per rank), then loaded back into two other layouts, the values bitwise equal.

1. The run itself is judged as every parity way is (training.verdict: both steps' losses, the
   last step's gradients and the updated weights against the whole model on the CPU).
2. The saved state is what each rank held: its local FSDP2 shards (Shard(0)), gathered on the CPU
   group, so the reference does not depend on the device's own collectives.
3. World 1: a plain, non-distributed CPU model's state dict (filled with NaN first, so a load that
   writes nothing fails) loaded with `dcp.load(..., no_dist=True)`: every tensor bitwise equal to
   the saved whole.
4. Resharding: a tensor-parallel layout of the same model on the device (column-wise Shard(0) and
   row-wise Shard(1) linears, the embedding replicated) loaded with `dcp.load` on the world; each
   rank's local piece bitwise equal to its slice of the saved whole.

DCP keeps no checksum of a tensor's bytes: a shard file whose tensor bytes changed on disk loads
without complaint, so what catches it is the bitwise comparison of (3) and (4) (MISMATCH, the
divergence naming the tensor and the load); a file whose structure broke makes the load raise
(ERROR, DCP's message). Variant `train2.corrupt` is that drill, not planned by default: after the
save, rank CORRUPT_RANK flips one byte inside its shard of CORRUPT_KEY in its own file, as a
faulty disk or copy would; a sound checker reports it MISMATCH.

The checkpoint lives in a temporary folder rank 0 makes (its path broadcast on the CPU group) and
removes after the item, whatever happened.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

from conformance.dist import data_parallel, training
from conformance.dist.judge import from_comparison
from conformance.numerics import compare
from op_db.records import Result, Status, WorkItem

CORRUPT_RANK, CORRUPT_KEY = 1, "1.linear.weight"


def is_drill(item: WorkItem) -> bool:
    return item.variant.endswith(".corrupt")


def shard(model: torch.nn.Module, mesh: Any) -> torch.nn.Module:
    """FSDP2: each block its own unit, the root the embedding and head."""
    from torch.distributed.fsdp import fully_shard

    for index in range(1, training.BLOCKS + 1):
        fully_shard(model[index], mesh=mesh)
    return fully_shard(model, mesh=mesh)


def tensor_parallel(model: torch.nn.Module, mesh: Any) -> torch.nn.Module:
    """The resharded layout: blocks alternately column-wise (weight Shard(0)) and row-wise
    (weight Shard(1)), the head column-wise, the embedding left whole on every rank."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan: dict[str, Any] = {}
    for index in range(1, training.BLOCKS + 1):
        plan[f"{index}.linear"] = (ColwiseParallel(output_layouts=Replicate()) if index % 2 else
                                   RowwiseParallel(input_layouts=Replicate()))
    plan[str(training.BLOCKS + 1)] = ColwiseParallel(output_layouts=Replicate())
    return parallelize_module(model, mesh, plan)


def local_of(value: Any) -> torch.Tensor:
    local = getattr(value, "to_local", None)
    return (local() if local is not None else value).detach().cpu()


def saved_whole(state: dict[str, Any], cpu_group: Any) -> dict[str, torch.Tensor]:
    """The whole of each tensor the ranks saved: their Shard(0) pieces joined in rank order,
    gathered on the CPU group."""
    pieces: list[Any] = [None] * dist.get_world_size(cpu_group)
    dist.all_gather_object(pieces, {k: local_of(v) for k, v in state.items()}, group=cpu_group)
    return {k: torch.cat([p[k] for p in pieces]) if _is_sharded(v) else pieces[0][k] for k, v in state.items()}


def _is_sharded(value: Any) -> bool:
    return hasattr(value, "placements") and any(p.is_shard() for p in value.placements)


def expected_local(whole: torch.Tensor, value: Any, rank: int, world_size: int) -> torch.Tensor:
    """The piece of `whole` a rank holds under `value`'s placement on a 1-D mesh (DTensor splits
    as torch.chunk does; a rank past the last chunk holds an empty piece)."""
    placements = getattr(value, "placements", ())
    for placement in placements:
        if placement.is_shard():
            chunks = torch.chunk(whole, world_size, dim=placement.dim)
            return chunks[rank] if rank < len(chunks) else whole.narrow(placement.dim, 0, 0)
    return whole


@contextlib.contextmanager
def shared_folder(rctx: Any) -> Iterator[str]:
    """A temporary folder every rank of the world writes to, removed by rank 0 afterwards."""
    path = [tempfile.mkdtemp(prefix="neuron-check-dcp-") if rctx.rank == 0 else None]
    dist.broadcast_object_list(path, src=0, group=rctx.cpu_group)
    try:
        yield path[0]
    finally:
        with contextlib.suppress(Exception):  # a rank already gone must not hang the others here
            dist.barrier(group=rctx.cpu_group)
        if rctx.rank == 0:
            shutil.rmtree(path[0], ignore_errors=True)


def corrupt_shard(folder: str, rank: int, local: torch.Tensor) -> str:
    """Flip one byte of `local`'s values where they sit in rank `rank`'s shard file."""
    path = os.path.join(folder, f"__{rank}_0.distcp")
    data = bytearray(open(path, "rb").read())
    values = local.contiguous().view(torch.uint8).numpy().tobytes()
    at = data.find(values)
    if at < 0:
        raise RuntimeError(f"the drill found no bytes of {CORRUPT_KEY} in {os.path.basename(path)}")
    data[at + len(values) // 2] ^= 0x40
    with open(path, "wb") as out:
        out.write(bytes(data))
    return os.path.basename(path)


def load_world_one(folder: str, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The checkpoint loaded into one non-distributed CPU model (no process group used)."""
    import torch.distributed.checkpoint as dcp

    model = training.whole(0, dtype)
    state = {k: torch.full_like(v, float("nan")) for k, v in model.state_dict().items()}
    dcp.load(state, checkpoint_id=folder, no_dist=True)
    model.load_state_dict(state)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def load_resharded(folder: str, seed: int, dtype: torch.dtype, rctx: Any, mesh: Any) -> dict[str, Any]:
    """The checkpoint loaded on the world into the tensor-parallel layout on the device."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    model = tensor_parallel(training.whole(seed, dtype).to(rctx.device), mesh)
    state = get_model_state_dict(model)
    with torch.no_grad():
        for value in state.values():
            (value.to_local() if hasattr(value, "to_local") else value).fill_(float("nan"))
    dcp.load(state, checkpoint_id=folder)
    set_model_state_dict(model, state)
    return dict(get_model_state_dict(model))


def exact_loads(whole: dict[str, torch.Tensor], world_one: dict[str, torch.Tensor], resharded: dict[str, Any],
                rctx: Any) -> tuple[Any, str | None]:
    """Bitwise comparison of both loads with the saved whole; the first failing tensor."""
    from conformance.numerics.comparison import Comparison

    total, divergence = Comparison(True, "exact"), None
    checks = [("world-1 load", key, world_one.get(key), whole[key]) for key in whole]
    checks += [("tensor-parallel load", key, local_of(resharded[key]),
                expected_local(whole[key], resharded[key], rctx.rank, rctx.world_size))
               for key in whole if key in resharded]
    for where, key, got, want in checks:
        step = compare(got, want, exact=True)
        if not step.ok and divergence is None:
            divergence = f"{key} ({where})"
            step.reason = f"{where} of {key}: {step.reason}"
        total = total.merge(step)
    missing = sorted(set(whole) - set(resharded))
    if missing:
        total = total.merge(Comparison(False, "structure", f"the tensor-parallel state dict lacks {missing}"))
    return total, divergence


def run_item(item: WorkItem, rctx: Any) -> Result:
    reason = data_parallel.not_applicable(rctx.world_size)
    if reason is not None:
        return Result.for_item(item, Status.SKIP, message=reason)
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict
    started = time.perf_counter()
    dtype = getattr(torch, item.dtype)
    mesh = data_parallel.mesh(rctx)
    drilled = None
    with rctx.adapter.track_fallbacks() as fallbacks, shared_folder(rctx) as folder:
        doing = "FSDP2 training"
        try:
            model = shard(training.whole(rctx.seed, dtype).to(rctx.device), mesh)
            run = training.snapshot(data_parallel.train(model, rctx), model)
            doing = "the sharded save"
            state = get_model_state_dict(model)
            whole = saved_whole(state, rctx.cpu_group)
            dcp.save(state, checkpoint_id=folder)
            dist.barrier(group=rctx.cpu_group)
            if is_drill(item) and rctx.rank == CORRUPT_RANK:
                drilled = corrupt_shard(folder, rctx.rank, local_of(state[CORRUPT_KEY]))
            dist.barrier(group=rctx.cpu_group)
            doing = "the world-1 load"
            world_one = load_world_one(folder, dtype)
            doing = "the tensor-parallel load"
            resharded = load_resharded(folder, rctx.seed, dtype, rctx, mesh)
            rctx.adapter.synchronize()
        except Exception as exc:  # noqa: BLE001 - the backend (or the damaged checkpoint) failed
            return data_parallel.failure(item, exc, started, doing)
    trained = training.verdict(item, run, rctx.seed, sorted(fallbacks.ops), started)
    if trained.status not in (Status.PASS, Status.FALLBACK):
        return trained
    comparison, divergence = exact_loads(whole, world_one, resharded, rctx)
    extra = {**trained.extra, "checkpoint_files": dist.get_world_size(), "corrupted": drilled}
    return from_comparison(item, comparison, trained.fallback_ops, time.perf_counter() - started,
                           divergence=divergence, extra=extra)
