"""Softmax: `op(x, dim)` when the schema has a `dim` argument (the last dimension is used),
else `op(x)` over the last dimension.

Edge shapes: rows that are not multiples of a tile, one element per row, rows holding -inf
(masked positions), large logits (a softmax without the max subtracted overflows), an empty
batch, transposed inputs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from conformance.kernels.families.tensors import describe, first_present, tensor

CASES = (((8, 33), "contiguous", 1.0), ((4, 1), "contiguous", 1.0), ((3, 5, 70), "contiguous", 1.0),
         ((6, 40), "contiguous", 60.0), ((0, 16), "contiguous", 1.0), ((12, 24), "transposed", 1.0))


def generate(schema: Any, dtype: torch.dtype, requires_grad: bool) -> Iterator[tuple[tuple, dict, str]]:
    dim = first_present(schema, ("dim",))
    for shape, layout, scale in CASES:
        x = tensor(shape, dtype, requires_grad, layout=layout, scale=scale)
        kwargs = {dim: -1} if dim else {}
        yield (x,), kwargs, f"x {describe(shape, layout)}" + (f", logits x{scale:g}" if scale != 1.0 else "")
    x = tensor((4, 20), dtype, False)
    x[:, 15:] = float("-inf")  # masked tail of every row
    yield (x.requires_grad_(requires_grad),), ({dim: -1} if dim else {}), "x 4x20, the last 5 of each row -inf"
