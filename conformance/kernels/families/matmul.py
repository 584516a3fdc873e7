"""Matmul: `op(a, b)` with a [M, K] and b [K, N].

Edge shapes: sizes that are not multiples of a tile, K = 1, M = 1 (a vector times a matrix),
an empty M, transposed a and b.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from conformance.kernels.families.tensors import describe, tensor

CASES = (((33, 65, 17), "contiguous", "contiguous"), ((1, 48, 40), "contiguous", "contiguous"),
         ((16, 1, 24), "contiguous", "contiguous"), ((0, 16, 8), "contiguous", "contiguous"),
         ((20, 36, 28), "transposed", "transposed"), ((128, 128, 64), "contiguous", "contiguous"))


def generate(schema: Any, dtype: torch.dtype, requires_grad: bool) -> Iterator[tuple[tuple, dict, str]]:
    for (m, k, n), layout_a, layout_b in CASES:
        a = tensor((m, k), dtype, requires_grad, layout=layout_a)
        b = tensor((k, n), dtype, requires_grad, layout=layout_b, scale=k ** -0.5)
        yield (a, b), {}, f"a {describe((m, k), layout_a)}, b {describe((k, n), layout_b)}"
