"""Attention: `op(q, k, v, ...)` with q [B, Hq, Sq, D] and k, v [B, Hkv, Sk, D], Hq a multiple
of Hkv (GQA; Hkv = 1 is MQA). Optional arguments, used when the schema has them:

    causal | is_causal          bool; a query attends to keys at or before its own position,
                                aligned to the end (query i of Sq sees keys j <= i + Sk - Sq)
    scale | softmax_scale       float; default 1/sqrt(D) when absent
    window | window_size | sliding_window
                                int; a query also sees at most this many keys before it
    key_padding_mask | padding_mask
                                bool [B, Sk]; False marks a padded key

Edge shapes: sequence lengths that are not multiples of a tile (17, 33, 65), one-token decode
(Sq = 1), GQA and MQA head ratios, causal with Sq < Sk, padding and sliding-window masks, an
empty batch, transposed q/k/v.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from conformance.kernels.families.tensors import describe, first_present, tensor

CAUSAL = ("causal", "is_causal")
SCALE = ("scale", "softmax_scale")
WINDOW = ("window", "window_size", "sliding_window")
PADDING = ("key_padding_mask", "padding_mask")
HEAD_DIM = 16

# (batch, query heads, kv heads, query length, key length, layout)
SHAPES = (
    (2, 4, 4, 33, 33, "contiguous"),   # not a multiple of a tile
    (1, 4, 2, 17, 17, "contiguous"),   # GQA 2:1
    (2, 4, 1, 65, 65, "contiguous"),   # MQA, two tiles and one row
    (2, 2, 2, 1, 37, "contiguous"),    # one-token decode against a cache
    (1, 2, 2, 9, 40, "contiguous"),    # chunked prefill: fewer queries than keys
    (2, 2, 2, 24, 24, "transposed"),   # [B, S, H, D] storage seen as [B, H, S, D]
    (0, 2, 2, 8, 8, "contiguous"),     # empty batch
)


def generate(schema: Any, dtype: torch.dtype, requires_grad: bool) -> Iterator[tuple[tuple, dict, str]]:
    causal, scale, window, padding = (first_present(schema, names) for names in (CAUSAL, SCALE, WINDOW, PADDING))
    for batch, hq, hkv, sq, sk, layout in SHAPES:
        for is_causal in ((False, True) if causal else (False,)):
            q, k, v = (_qkv(batch, heads, length, dtype, requires_grad, layout)
                       for heads, length in ((hq, sq), (hkv, sk), (hkv, sk)))
            kwargs: dict[str, Any] = {}
            label = f"q {describe((batch, hq, sq, HEAD_DIM), layout)}, kv heads {hkv}, keys {sk}"
            if causal:
                kwargs[causal] = is_causal
                label += f", causal={is_causal}"
            if scale:
                kwargs[scale] = 0.5 / HEAD_DIM ** 0.5
            yield (q, k, v), kwargs, label
    if window:
        q, k, v = (_qkv(2, 2, 33, dtype, requires_grad, "contiguous") for _ in range(3))
        yield (q, k, v), {window: 8, **({causal: True} if causal else {})}, "sliding window 8 over 33 keys"
    if padding:
        q, k, v = (_qkv(2, 2, 20, dtype, requires_grad, "contiguous") for _ in range(3))
        keep = torch.ones(2, 20, dtype=torch.bool)
        keep[0, 13:] = False  # the first sequence is padded after 13 tokens
        yield (q, k, v), {padding: keep}, "padding mask: 13 of 20 keys in sequence 0"


def _qkv(batch: int, heads: int, length: int, dtype: torch.dtype, requires_grad: bool, layout: str) -> torch.Tensor:
    if layout == "transposed":
        stored = tensor((batch, length, heads, HEAD_DIM), dtype, False)
        value = stored.transpose(1, 2)
        return value.detach().requires_grad_(True) if requires_grad else value
    return tensor((batch, heads, length, HEAD_DIM), dtype, requires_grad)
