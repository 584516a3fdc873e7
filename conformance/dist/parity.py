"""Training-step parity: two SGD steps of the zoo's tiny llama, run 4 ways on the device and
compared with the same two steps in one CPU process (and a float64 oracle) by the numerics rule.

Ways: `single` (one device, whole batch), `ddp` (DistributedDataParallel, the batch split
over ranks), `fsdp2` (fully_shard per decoder layer and root), `fsdp2_tp` (FSDP2 over the
first axis of a 2-D mesh, tensor parallel over the second; needs 4 ranks or more). Compared:
both steps' losses (averaged over ranks on the CPU group) and every gradient of the second
step, in parameter order; `divergence` names the first parameter whose gradient fails.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from conformance.dist.judge import from_comparison
from conformance.numerics import compare
from conformance.outcome import classify_exception, describe_exception
from op_db.records import Result, Status, WorkItem, shorten

BATCH, SEQ, STEPS, LR = 4, 8, 2, 0.1


def _model(seed: int, dtype: torch.dtype) -> Any:
    from conformance.models import zoo

    return zoo.build_model(zoo.catalogue()["llama"], seed=seed).train().to(dtype)


def _batches(seed: int, vocab: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed + 1)
    return [torch.randint(0, vocab, (BATCH, SEQ), generator=gen) for _ in range(STEPS)]


def _train(model: Any, batches: list[torch.Tensor], device: str, rows: slice, cpu_group: Any = None):
    """STEPS SGD steps; (losses, {name: full gradient on CPU}) of the last step."""
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, foreach=False)
    losses = []
    for batch in batches:
        optimizer.zero_grad()
        ids = batch[rows].to(device)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        value = loss.detach().cpu().double().reshape(1)
        if cpu_group is not None:  # the whole batch's loss is the mean of the ranks' losses
            dist.all_reduce(value, group=cpu_group)
            value /= dist.get_world_size(cpu_group)
        losses.append(value)
        grads = {name.removeprefix("module."): _full(p.grad) for name, p in model.named_parameters()}
        optimizer.step()
    return torch.cat(losses), grads


def _full(t: Any) -> torch.Tensor:
    full = getattr(t, "full_tensor", None)
    return (full() if full is not None else t).detach().cpu()


def _wrap(way: str, model: Any, rctx: Any) -> Any:
    if way == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    device_type = rctx.device.split(":", 1)[0]
    if way == "fsdp2":
        mesh = init_device_mesh(device_type, (rctx.world_size,))
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        return fully_shard(model, mesh=mesh)
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh(device_type, (rctx.world_size // 2, 2), mesh_dim_names=("dp", "tp"))
    plan = {"self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(), "mlp.down_proj": RowwiseParallel()}
    for layer in model.model.layers:
        parallelize_module(layer, mesh["tp"], plan)
        fully_shard(layer, mesh=mesh["dp"])
    return fully_shard(model, mesh=mesh["dp"])


def _rows(way: str, rctx: Any) -> slice:
    if way == "single":
        return slice(None)
    shards = rctx.world_size // 2 if way == "fsdp2_tp" else rctx.world_size
    index = rctx.rank // 2 if way == "fsdp2_tp" else rctx.rank
    per = BATCH // shards
    return slice(index * per, (index + 1) * per)


def checked_elsewhere(way: str) -> Any:
    """The module whose `run_item` checks a way that is not this module's, or None."""
    from conformance.dist import checkpoint, context_parallel, pipeline, pp_fsdp, simple_fsdp, tensor_parallel, zero

    if way in tensor_parallel.WAYS + zero.WAYS:
        return tensor_parallel if way in tensor_parallel.WAYS else zero
    if way in ("dcp", "cp_sdpa", "simple_fsdp", pp_fsdp.WAY):
        return {"dcp": checkpoint, "cp_sdpa": context_parallel, "simple_fsdp": simple_fsdp, pp_fsdp.WAY: pp_fsdp}[way]
    return pipeline if way in pipeline.SCHEDULES else None


def run_item(item: WorkItem, rctx: Any) -> Result:
    way = item.subject.split(".", 1)[1]
    if checked_elsewhere(way) is not None:
        return checked_elsewhere(way).run_item(item, rctx)
    if way == "fsdp2_tp" and (rctx.world_size < 4 or rctx.world_size % 2):
        return Result.for_item(item, Status.SKIP, message="FSDP2 + tensor parallel needs an even world of 4 ranks or more.")
    if way != "single" and BATCH % max(1, rctx.world_size // (2 if way == "fsdp2_tp" else 1)):
        return Result.for_item(item, Status.SKIP, message=f"a batch of {BATCH} does not split over {rctx.world_size} ranks.")
    dtype = getattr(torch, item.dtype)
    started = time.perf_counter()
    seed = rctx.seed
    try:
        model = _model(seed, dtype)
        batches = _batches(seed, model.config.vocab_size)
        ref_losses, ref_grads = _train(model, batches, "cpu", slice(None))
        hi_losses, hi_grads = _train(_model(seed, torch.float64), batches, "cpu", slice(None))
    except Exception as exc:  # noqa: BLE001
        return Result.for_item(item, Status.REF_ERROR, message=shorten(describe_exception(exc)))
    with rctx.adapter.track_fallbacks() as fallbacks:
        try:
            model = _wrap(way, _model(seed, dtype).to(rctx.device), rctx) if way != "single" else \
                _model(seed, dtype).to(rctx.device)
            dev_losses, dev_grads = _train(model, batches, rctx.device, _rows(way, rctx),
                                           rctx.cpu_group if way != "single" else None)
        except Exception as exc:  # noqa: BLE001
            return Result.for_item(item, classify_exception(exc), samples=1, message=shorten(describe_exception(exc)),
                                   duration_s=time.perf_counter() - started)
    comparison = compare(dev_losses.to(dtype), ref_losses.to(dtype), hi_losses)
    divergence = None if comparison.ok else "loss"
    for name, ref in ref_grads.items():
        step = compare(dev_grads.get(name), ref, hi_grads[name])
        if not step.ok and divergence is None:
            divergence = name
            step.reason = f"gradient of {name}: {step.reason}"
        comparison = comparison.merge(step)
    return from_comparison(item, comparison, sorted(fallbacks.ops), time.perf_counter() - started,
                           divergence=divergence, extra={"losses": [float(v) for v in dev_losses]})
