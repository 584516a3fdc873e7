"""Normalisation over the last dimension: `op(x, weight, ...)` with x [..., H] and weight [H].
Optional arguments used when the schema has them: `eps` (float, 1e-6 here) and `bias` ([H]).

Edge shapes: widths that are not multiples of a tile (33, 130), a 3-D input, one row, an empty
batch, transposed and strided (gapped) inputs, rows of large magnitude (overflow of a naive sum
of squares in half precision).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from conformance.kernels.families.tensors import describe, first_present, tensor

# (shape of x, layout, scale of the values)
CASES = (
    ((8, 64), "contiguous", 1.0),
    ((5, 33), "contiguous", 1.0),
    ((2, 7, 130), "contiguous", 1.0),
    ((1, 48), "contiguous", 1.0),
    ((0, 32), "contiguous", 1.0),
    ((16, 40), "transposed", 1.0),
    ((6, 40), "strided", 1.0),
    ((4, 64), "contiguous", 300.0),
)


def generate(schema: Any, dtype: torch.dtype, requires_grad: bool) -> Iterator[tuple[tuple, dict, str]]:
    eps, bias = first_present(schema, ("eps", "epsilon")), first_present(schema, ("bias",))
    for shape, layout, scale in CASES:
        width = shape[-1]
        x = tensor(shape, dtype, requires_grad, layout=layout, scale=scale)
        weight = (1.0 + 0.1 * tensor((width,), torch.float32, False)).to(dtype).requires_grad_(requires_grad)
        kwargs: dict[str, Any] = {}
        if eps:
            kwargs[eps] = 1e-6
        if bias:
            kwargs[bias] = tensor((width,), dtype, requires_grad, scale=0.1)
        label = f"x {describe(shape, layout)}" + (f", values x{scale:g}" if scale != 1.0 else "")
        yield (x, weight), kwargs, label
