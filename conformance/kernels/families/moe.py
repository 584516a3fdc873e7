"""MoE blockwise grouped matmul: `op(x, w, counts)` with tokens x [T, H] sorted by expert,
expert weights w [E, H, N] and counts int64 [E], the tokens each expert receives (they sum to
T); the output is [T, N], row t multiplied by its expert's weight.

Edge shapes: experts that receive no tokens (first, middle, last), every token to one expert,
token counts that are not multiples of a tile, no tokens at all, transposed expert weights.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from conformance.kernels.families.tensors import describe, tensor

HIDDEN, OUT = 24, 20

# (tokens per expert, layout of w)
CASES = (
    ((5, 7, 3, 9), "contiguous"),
    ((0, 6, 0, 11), "contiguous"),   # experts 0 and 2 get nothing
    ((13, 0, 0, 0), "contiguous"),   # every token to the first expert
    ((4, 9, 0), "contiguous"),       # the last expert gets nothing
    ((33, 1), "transposed"),         # w stored [E, N, H]
    ((0, 0, 0), "contiguous"),       # no tokens at all
)


def generate(schema: Any, dtype: torch.dtype, requires_grad: bool) -> Iterator[tuple[tuple, dict, str]]:
    for counts, layout in CASES:
        tokens = sum(counts)
        x = tensor((tokens, HIDDEN), dtype, requires_grad)
        w = tensor((len(counts), HIDDEN, OUT), dtype, requires_grad, layout=layout, scale=HIDDEN ** -0.5)
        label = f"x {tokens}x{HIDDEN}, w {describe((len(counts), HIDDEN, OUT), layout)}, tokens per expert {list(counts)}"
        yield (x, w, torch.tensor(counts, dtype=torch.int64)), {}, label
