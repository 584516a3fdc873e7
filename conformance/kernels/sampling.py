"""An op's samples: made on the CPU (seeded), then moved to the device with their exact strides.

A kernel that ignores strides must meet the strides its users pass, so a transposed or gapped
CPU sample stays transposed or gapped on the device (`to_device` copies into a tensor of the
same size and strides rather than calling `.to`, which may make it contiguous).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree


@dataclasses.dataclass
class Sample:
    args: tuple
    kwargs: dict
    label: str

    def leaves(self) -> list[torch.Tensor]:
        return [t for t in pytree.tree_leaves((self.args, self.kwargs)) if isinstance(t, torch.Tensor)]


def make_samples(generate: Callable[..., Any], dtype: torch.dtype, requires_grad: bool, seed: int,
                 limit: int | None) -> list[Sample]:
    """The generator's samples for `dtype` on the CPU, the same in every run and process."""
    torch.manual_seed(seed)
    found = []
    for index, produced in enumerate(generate("cpu", dtype, requires_grad)):
        if limit is not None and index >= limit:
            break
        args, kwargs, *label = produced
        found.append(Sample(tuple(args), dict(kwargs or {}), label[0] if label else describe(args, kwargs)))
    return found


def describe(args: Any, kwargs: Any) -> str:
    """'2x4x33x16 bfloat16 (strides 2112,528,16,1), causal=True': what a failure names."""
    parts = [_describe_value(a) for a in args] + [f"{k}={_describe_value(v)}" for k, v in (kwargs or {}).items()]
    return ", ".join(parts)


def _describe_value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        shape = "x".join(map(str, value.shape)) or "scalar"
        text = f"{shape} {str(value.dtype).removeprefix('torch.')}"
        return text if value.is_contiguous() else f"{text} (strides {','.join(map(str, value.stride()))})"
    return repr(value)


def to_device(sample: Sample, device: str) -> Sample:
    """The sample on `device`: same sizes, strides and requires_grad; fresh leaves."""
    return Sample(*pytree.tree_map(lambda t: _moved(t, device), (sample.args, sample.kwargs)), sample.label)


def fresh(sample: Sample) -> Sample:
    """The sample with fresh CPU leaves, so gradients of one run never reach another's."""
    return to_device(sample, "cpu")


def cast(sample: Sample, dtype: torch.dtype) -> Sample:
    """Floating tensors of the sample in `dtype` (the oracle's float64), keeping requires_grad."""
    def convert(t: Any) -> Any:
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            return t
        return t.detach().to(dtype).requires_grad_(t.requires_grad)

    return Sample(*pytree.tree_map(convert, (sample.args, sample.kwargs)), sample.label)


def _moved(value: Any, device: str) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    placed = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=device)
    with torch.no_grad():
        placed.copy_(value.detach())
    return placed.requires_grad_(value.requires_grad)


def to_cpu(value: Any) -> Any:
    return pytree.tree_map(lambda t: t.detach().cpu() if isinstance(t, torch.Tensor) else t, value)
