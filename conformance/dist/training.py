"""The tiny model the pipeline, SimpleFSDP and PP+FSDP parity items train, its CPU reference and
the verdict on a rank's part of it.

The model is a stack (token embedding, BLOCKS residual tanh blocks, a vocabulary head) so that a
pipeline can cut it between any two pieces and a parameter keeps its name in every layout. A
rank's run is judged by the numerics rule against the same STEPS SGD steps of the whole model in
one CPU process, with a float64 oracle: every step's loss, every gradient of the last step and
every weight after it, for the parameters the rank holds (the worst rank speaks for the item, so
together the ranks cover every parameter).
"""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Any

import torch
from torch import nn

from conformance.dist.judge import from_comparison
from conformance.numerics import compare
from op_db.records import Result, WorkItem

BATCH, SEQ, WIDTH, VOCAB, BLOCKS, STEPS, LR = 8, 4, 16, 32, 4, 2, 0.1


class Block(nn.Module):
    """x + tanh(W x): a residual piece a pipeline stage may hold any number of."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.linear(x))


def pieces(seed: int) -> list[nn.Module]:
    """The model's pieces in order, seeded: embedding, BLOCKS blocks, head."""
    torch.manual_seed(seed)
    return [nn.Embedding(VOCAB, WIDTH), *(Block() for _ in range(BLOCKS)), nn.Linear(WIDTH, VOCAB)]


def chunk(parts: list[nn.Module], indices: range) -> nn.Sequential:
    """The pieces at `indices` as one module whose parameter names are the whole model's."""
    return nn.Sequential(collections.OrderedDict((str(i), parts[i]) for i in indices))


def whole(seed: int, dtype: torch.dtype) -> nn.Sequential:
    parts = pieces(seed)
    return chunk(parts, range(len(parts))).to(dtype)


def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB).float(), targets.reshape(-1))


def batches(seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """STEPS (tokens, next tokens) batches, the same on every rank."""
    gen = torch.Generator().manual_seed(seed + 1)
    out = []
    for _ in range(STEPS):
        ids = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)
        out.append((ids[:, :-1].contiguous(), ids[:, 1:].contiguous()))
    return out


@dataclasses.dataclass
class Run:
    """What a training run leaves: every step's loss, the last step's gradients, the weights after it."""

    losses: torch.Tensor
    grads: dict[str, torch.Tensor]
    weights: dict[str, torch.Tensor]


def full(t: Any) -> torch.Tensor:
    """A CPU copy of a tensor, a DTensor's gathered whole."""
    gathered = getattr(t, "full_tensor", None)
    return (gathered() if gathered is not None else t).detach().cpu()


def snapshot(losses: list[torch.Tensor], model: nn.Module) -> Run:
    named = list(model.named_parameters())
    return Run(torch.stack([v.detach().cpu().double().reshape(()) for v in losses]),
               {name: full(p.grad) for name, p in named if p.grad is not None},
               {name: full(p) for name, p in named})


def train_whole(seed: int, dtype: torch.dtype) -> Run:
    """The reference: STEPS SGD steps of the whole model over the whole batch, on the CPU."""
    model = whole(seed, dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for ids, targets in batches(seed):
        optimizer.zero_grad()
        loss = loss_fn(model(ids), targets)
        loss.backward()
        losses.append(loss.detach())
        optimizer.step()
    return snapshot(losses, model)


def verdict(item: WorkItem, dev: Run, seed: int, fallback_ops: list[str], started: float) -> Result:
    """The numerics rule over the losses, then each gradient and weight `dev` holds."""
    dtype = getattr(torch, item.dtype)
    return judge_runs(item, dev, train_whole(seed, dtype), train_whole(seed, torch.float64), dtype, fallback_ops,
                      started)


def judge_runs(item: WorkItem, dev: Run, ref: Run, hi: Run, dtype: torch.dtype, fallback_ops: list[str],
               started: float) -> Result:
    """The numerics rule over `dev`'s losses (in `dtype`), then each gradient and weight it holds,
    against the CPU run `ref` and the float64 oracle run `hi`."""
    comparison = compare(dev.losses.to(dtype), ref.losses.to(dtype), hi.losses)
    divergence = None if comparison.ok else "loss"
    checks = [("gradient", dev.grads, ref.grads, hi.grads), ("updated weight", dev.weights, ref.weights, hi.weights)]
    for what, got, want, oracle in checks:
        for name, value in got.items():
            step = compare(value, want[name], oracle[name])
            if not step.ok and divergence is None:
                divergence = name
                step.reason = f"{what} of {name}: {step.reason}"
            comparison = comparison.merge(step)
    return from_comparison(item, comparison, fallback_ops, time.perf_counter() - started, divergence=divergence,
                           extra={"losses": [float(v) for v in dev.losses], "parameters": sorted(dev.weights)})
