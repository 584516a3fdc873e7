"""RMSNorm over the last dimension, float32 inside: the kernel (rows in blocks, reading the
input through its strides) and the reference."""

from __future__ import annotations

import torch

ROWS = 4


def reference(x, weight, eps: float = 1e-6):
    wide = x.double()
    return (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps) * weight.double()).to(x.dtype)


def kernel(x, weight, eps: float = 1e-6, *, bugs: frozenset = frozenset()):
    if "ignores_strides" in bugs:
        # The bug: reads the storage as if the input were contiguous.
        contiguous = torch.empty(x.shape, dtype=x.dtype, device=x.device).stride()
        x = x.as_strided(x.shape, contiguous, x.storage_offset())
    flat = x.reshape(-1, x.shape[-1])
    blocks = []
    for start in range(0, flat.shape[0], ROWS):
        rows = flat[start:start + ROWS].float()
        blocks.append(rows * torch.rsqrt(rows.pow(2).mean(-1, keepdim=True) + eps) * weight.float())
    out = torch.cat(blocks) if blocks else flat.new_empty(flat.shape, dtype=torch.float32)
    return out.to(x.dtype).reshape(x.shape)
