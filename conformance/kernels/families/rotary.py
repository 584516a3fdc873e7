"""Rotary position embedding: `op(x, cos, sin)` with x [B, H, S, D] (D even), cos and sin
[S, D], applied as x * cos + rotate_half(x) * sin in the reference the library gives.

Edge shapes: one-token decode (S = 1), odd sequence lengths, an empty batch, a transposed x
([B, S, H, D] storage).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from conformance.kernels.families.tensors import describe, tensor

HEAD_DIM = 16
CASES = (((2, 4, 33), "contiguous"), ((1, 2, 1), "contiguous"), ((2, 2, 17), "transposed"), ((0, 2, 8), "contiguous"))


def generate(schema: Any, dtype: torch.dtype, requires_grad: bool) -> Iterator[tuple[tuple, dict, str]]:
    for (batch, heads, length), layout in CASES:
        if layout == "transposed":
            x = tensor((batch, length, heads, HEAD_DIM), dtype, False).transpose(1, 2)
            x = x.detach().requires_grad_(True) if requires_grad else x
        else:
            x = tensor((batch, heads, length, HEAD_DIM), dtype, requires_grad)
        positions = torch.arange(length, dtype=torch.float64)[:, None]
        frequencies = 10000.0 ** (-torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM)
        angles = torch.cat([positions * frequencies] * 2, dim=-1)
        yield (x, angles.cos().to(dtype), angles.sin().to(dtype)), {}, f"x {describe((batch, heads, length, HEAD_DIM), layout)}"
