"""The tiny pre-norm MLP model the tensor-parallel, ZeRO and activation-checkpointing parity items
train, its CPU reference, and what those items share (the training loop, the failure mapping).

The model is an embedding, BLOCKS blocks `x + down(tanh(up(norm(x))))` (a LayerNorm and a
two-layer MLP: what column/row-wise and sequence-parallel plans cut), a final LayerNorm and a
vocabulary head, over conformance/dist/training.py's batches and loss. Training is STEPS steps
of SGD with momentum (so ZeRO's sharded optimizer state takes part); the reference is the same
steps of the whole model over the whole batch in one CPU process, and a float64 oracle run. A
way judges, by the numerics rule (training.judge_runs), every step's loss, every gradient of the
last step and every weight after it, DTensors gathered whole.

Mixed precision (`compute_dtype`): the reference keeps master weights in the item's dtype and
computes each step with a copy cast to `compute_dtype`, its gradients cast back, as FSDP2's
MixedPrecisionPolicy does, so a correct device is compared with the same arithmetic.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from conformance.dist import training
from conformance.dist.training import BATCH, LR, SEQ, STEPS, VOCAB, WIDTH, Run
from conformance.outcome import classify_exception, describe_exception
from op_db.records import Result, Status, WorkItem, shorten

HIDDEN, BLOCKS, MOMENTUM = 2 * WIDTH, 2, 0.9
# Wrappers' prefixes in parameter names (DDP, checkpoint_wrapper), not the model's own names.
WRAPPER_PREFIXES = re.compile(r"(^|\.)(module|_checkpoint_wrapped_module)\.")
# c10d's words for a collective a backend lacks: "Backend nccl does not support allgather".
MISSING_COLLECTIVE = re.compile(r"Backend \S+ does not support (\w+)")


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(WIDTH, HIDDEN)
        self.down = nn.Linear(HIDDEN, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.tanh(self.up(x)))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.mlp = MLP()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def build(seed: int, dtype: torch.dtype) -> Stack:
    torch.manual_seed(seed)
    return Stack().to(dtype)


def optimizer_for(params: Any) -> torch.optim.Optimizer:
    # One tensor at a time: a foreach step over tensor parallel's mix of DTensors and plain tensors fails.
    return torch.optim.SGD(params, lr=LR, momentum=MOMENTUM, foreach=False)


def reference(seed: int, dtype: torch.dtype, compute_dtype: torch.dtype | None = None) -> Run:
    """STEPS steps of the whole model over the whole batch on the CPU (computing in
    `compute_dtype` over master weights in `dtype`, when given)."""
    master = build(seed, dtype)
    optimizer = optimizer_for(master.parameters())
    losses = []
    for ids, targets in training.batches(seed):
        optimizer.zero_grad()
        work = master if compute_dtype is None else copy.deepcopy(master).to(compute_dtype)
        loss = training.loss_fn(work(ids), targets)
        loss.backward()
        if work is not master:
            for mine, theirs in zip(master.parameters(), work.parameters()):
                mine.grad = theirs.grad.to(dtype)
        losses.append(loss.detach())
        optimizer.step()
    return training.snapshot(losses, master)


def rows(rank: int, world_size: int) -> slice:
    """This rank's share of the batch in a data-parallel way."""
    per = BATCH // world_size
    return slice(rank * per, (rank + 1) * per)


def train(model: nn.Module, optimizer: Any, device: str, seed: int, share: slice = slice(None),
          cpu_group: Any = None) -> Run:
    """STEPS steps on the device over this rank's `share` of each batch; with `cpu_group` (data
    parallel) each step's loss is the mean of the ranks' losses, the whole batch's."""
    losses = []
    for ids, targets in training.batches(seed):
        optimizer.zero_grad()
        loss = training.loss_fn(model(ids[share].to(device)), targets[share].to(device))
        loss.backward()
        value = loss.detach().cpu().double().reshape(1)
        if cpu_group is not None:
            dist.all_reduce(value, group=cpu_group)
            value /= dist.get_world_size(cpu_group)
        losses.append(value[0])
        optimizer.step()
    run = training.snapshot(losses, model)
    plain = lambda named: {WRAPPER_PREFIXES.sub(r"\1", name): v for name, v in named.items()}  # noqa: E731
    return Run(run.losses, plain(run.grads), plain(run.weights))


def not_applicable(world_size: int, data_parallel: bool) -> str | None:
    """Why a way cannot run in this world (a SKIP's reason), or None."""
    if world_size < 2:
        return "this way shards the model over ranks and needs a world of 2 ranks or more."
    if data_parallel and BATCH % world_size:
        return f"a batch of {BATCH} does not split over {world_size} ranks."
    if not data_parallel and (HIDDEN % world_size or SEQ % world_size or VOCAB % world_size):
        return f"the model's widths ({HIDDEN}, sequence {SEQ}, vocabulary {VOCAB}) do not split over {world_size} ranks."
    return None


def failure(item: WorkItem, exc: BaseException, started: float, needs: str) -> Result:
    """The device failed the way: a collective the process group refuses is UNSUPPORTED naming it
    (`needs` says what the way uses it for), anything else as outcome.py says."""
    found = MISSING_COLLECTIVE.search(str(exc))
    duration = time.perf_counter() - started
    if found is not None:
        missing = found.group(1)
        message = f"{needs} needs the collective {missing}, which this process group lacks: {describe_exception(exc)}"
        return Result.for_item(item, Status.UNSUPPORTED, samples=1, message=shorten(message), duration_s=duration,
                               extra={"missing_collective": missing})
    return Result.for_item(item, classify_exception(exc), samples=1, message=shorten(describe_exception(exc)),
                           duration_s=duration)


def judged(item: WorkItem, dev: Run, seed: int, fallback_ops: list[str], started: float,
           compute_dtype: torch.dtype | None = None, **extra: Any) -> Result:
    """`dev` against the CPU reference and the float64 oracle. With `compute_dtype`, both sides are
    judged in that dtype: the arithmetic was done in it, so its tolerances are the rule's."""
    dtype = getattr(torch, item.dtype)
    ref, hi = reference(seed, dtype, compute_dtype), reference(seed, torch.float64)
    if compute_dtype is not None:
        dtype = compute_dtype
        dev, ref = (Run(r.losses, cast(r.grads, dtype), cast(r.weights, dtype)) for r in (dev, ref))
    result = training.judge_runs(item, dev, ref, hi, dtype, fallback_ops, started)
    result.extra.update(extra)
    return result


def run_way(item: WorkItem, rctx: Any, wrap: Callable[[Stack], tuple[Any, Any]], needs: str, *,
            data_parallel: bool, compute_dtype: torch.dtype | None = None,
            extra: Callable[[], dict[str, Any]] = dict) -> Result:
    """One way on this rank: build the model on the device, `wrap` it (the way's parallelism:
    the wrapped model and its optimizer), train it and judge it; `needs` names the way in a
    missing collective's message, `extra()` adds what the way measured to the result."""
    reason = not_applicable(rctx.world_size, data_parallel)
    if reason is not None:
        return Result.for_item(item, Status.SKIP, message=reason)
    started = time.perf_counter()
    share, group = (rows(rctx.rank, rctx.world_size), rctx.cpu_group) if data_parallel else (slice(None), None)
    with rctx.adapter.track_fallbacks() as fallbacks:
        try:
            model, optimizer = wrap(build(rctx.seed, getattr(torch, item.dtype)).to(rctx.device))
            dev = train(model, optimizer, rctx.device, rctx.seed, share, group)
            rctx.adapter.synchronize()
        except Exception as exc:  # noqa: BLE001 - the backend failed the way's training
            return failure(item, exc, started, needs)
    return judged(item, dev, rctx.seed, sorted(fallbacks.ops), started, compute_dtype, **extra())


def cast(tensors: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    return {name: t.to(dtype) for name, t in tensors.items()}
