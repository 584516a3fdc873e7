"""What the family generators share: seeded CPU tensors, in a layout, and the op's arguments."""

from __future__ import annotations

from typing import Any

import torch


def tensor(shape: tuple[int, ...], dtype: torch.dtype, requires_grad: bool, *, layout: str = "contiguous",
           scale: float = 1.0) -> torch.Tensor:
    """A random CPU tensor of `shape`: "contiguous"; "transposed" (its last two dimensions stored
    swapped, so the strides are not the contiguous ones); "strided" (every other row of a
    larger tensor: the storage has gaps). A leaf when `requires_grad`."""
    if layout == "transposed" and len(shape) >= 2:
        stored = (*shape[:-2], shape[-1], shape[-2])
        value = (torch.randn(stored, dtype=torch.float32) * scale).to(dtype).transpose(-1, -2)
    elif layout == "strided" and len(shape) >= 1:
        value = (torch.randn((*shape[:-1], 2 * shape[-1]), dtype=torch.float32) * scale).to(dtype)[..., ::2]
    else:
        value = (torch.randn(shape, dtype=torch.float32) * scale).to(dtype)
    if requires_grad:
        # A leaf with the same strides (detach keeps the view's layout).
        value = value.detach().requires_grad_(True)
    return value


def argument_names(schema: Any) -> list[str]:
    return [argument.name for argument in schema.arguments]


def first_present(schema: Any, names: tuple[str, ...]) -> str | None:
    """The first of `names` the op's schema has as an argument, or None."""
    present = set(argument_names(schema))
    return next((name for name in names if name in present), None)


def describe(shape: tuple[int, ...], layout: str) -> str:
    dims = "x".join(str(d) for d in shape)
    return dims if layout == "contiguous" else f"{dims} {layout}"
