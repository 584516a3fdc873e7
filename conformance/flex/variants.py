"""The score_mod / mask_mod variants the flex attention suite checks, and their dense reference.

Each variant builds its inputs (seeded, on the CPU) and, for a device, its mods: a mod that
captures a tensor (a learned bias, ALiBi slopes, document ids) captures it on that device. The
same mods, called on broadcast index tensors, give the dense mask and bias of the reference.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import torch


@dataclasses.dataclass(frozen=True)
class Variant:
    heads: int = 2
    kv_heads: int | None = None  # GQA: fewer key/value heads (enable_gqa)
    length: int = 48
    kv_length: int | None = None
    dim: int = 16
    score: str | None = None  # a score_mod in SCORE_MODS
    mask: str | None = None  # a mask_mod in MASK_MODS
    return_lse: bool = False
    block: int = 16  # create_block_mask's BLOCK_SIZE

    def sizes(self, grow: int = 0) -> tuple[int, int, int, int]:
        """(heads, kv heads, query length, kv length); `grow` lengthens both (the --dynamic second run)."""
        kv = self.kv_length or self.length
        return self.heads, self.kv_heads or self.heads, self.length + (grow if self.length > 1 else 0), kv + grow


def _tensors(variant: Variant, seed: int, grow: int = 0) -> dict[str, torch.Tensor]:
    """Seeded float32 CPU tensors: q, k, v and the captured buffers the mods use."""
    heads, kv_heads, length, kv_length = variant.sizes(grow)
    gen = torch.Generator().manual_seed(seed)
    found = {"q": torch.randn(1, heads, length, variant.dim, generator=gen),
             "k": torch.randn(1, kv_heads, kv_length, variant.dim, generator=gen),
             "v": torch.randn(1, kv_heads, kv_length, variant.dim, generator=gen)}
    if variant.score == "learned_bias":
        found["bias"] = torch.randn(heads, length, kv_length, generator=gen) * 0.5
    if variant.score == "alibi":
        found["slopes"] = torch.tensor([2.0 ** (-8 * (i + 1) / heads) for i in range(heads)])
    if variant.mask == "document":
        found["doc"] = torch.arange(max(length, kv_length)) * 3 // max(length, kv_length)
    if variant.mask and variant.mask.startswith("block_sparse"):
        density = float(variant.mask.split("_")[-1]) / 100
        blocks = -(-max(length, kv_length) // variant.block)
        table = torch.rand(blocks, blocks, generator=gen) < density
        found["blocks"] = table | torch.eye(blocks, dtype=torch.bool)
    return found


def _score_mod(name: str | None, t: dict[str, torch.Tensor]) -> Callable | None:
    if name is None:
        return None
    if name == "alibi":
        slopes = t["slopes"]
        return lambda s, b, h, q, kv: s + slopes[h] * (kv - q)
    if name == "relative_position":
        return lambda s, b, h, q, kv: s + 0.05 * (q - kv)
    if name == "soft_cap":
        return lambda s, b, h, q, kv: 2.0 * torch.tanh(s / 2.0)
    if name == "learned_bias":
        bias = t["bias"]
        return lambda s, b, h, q, kv: s + bias[h, q, kv]
    raise KeyError(name)


def _mask_mod(name: str | None, t: dict[str, torch.Tensor], block: int) -> Callable | None:
    if name is None:
        return None
    if name == "causal":
        return lambda b, h, q, kv: q >= kv
    if name == "sliding_window":
        return lambda b, h, q, kv: (q >= kv) & (q - kv <= 8)
    if name == "prefix_lm":
        return lambda b, h, q, kv: (kv <= 12) | (q >= kv)
    if name == "document":
        doc = t["doc"]
        return lambda b, h, q, kv: doc[q] == doc[kv]
    if name.startswith("block_sparse"):
        blocks = t["blocks"]
        return lambda b, h, q, kv: blocks[q // block, kv // block]
    raise KeyError(name)


VARIANTS: dict[str, Variant] = {
    "none": Variant(),
    "causal": Variant(mask="causal"),
    "sliding_window": Variant(mask="sliding_window"),
    "prefix_lm": Variant(mask="prefix_lm"),
    "document": Variant(mask="document"),
    "alibi": Variant(score="alibi", mask="causal"),
    "relative_position": Variant(score="relative_position"),
    "soft_cap": Variant(score="soft_cap"),
    "learned_bias": Variant(score="learned_bias"),
    "block_sparse_75": Variant(mask="block_sparse_75", length=64),
    "block_sparse_50": Variant(mask="block_sparse_50", length=64),
    "block_sparse_25": Variant(mask="block_sparse_25", length=64),
    "gqa": Variant(heads=4, kv_heads=2, mask="causal"),
    "odd_length": Variant(length=150, kv_length=150, mask="causal", block=128),
    "decode": Variant(length=1, kv_length=300, block=128),
    "return_lse": Variant(mask="causal", return_lse=True),
}


@dataclasses.dataclass
class Sample:
    """One variant's tensors for one run (the grads flow to q, k, v and a learned bias)."""

    variant: Variant
    tensors: dict[str, torch.Tensor]

    def on(self, device: Any, dtype: torch.dtype, requires_grad: bool) -> "Sample":
        def move(name: str, t: torch.Tensor) -> torch.Tensor:
            if not t.is_floating_point() or name == "slopes":
                return t.to(device)
            moved = t.to(device=device, dtype=dtype).detach()
            return moved.requires_grad_(requires_grad and name in GRAD_INPUTS)
        return Sample(self.variant, {n: move(n, t) for n, t in self.tensors.items()})

    def grad_inputs(self) -> list[torch.Tensor]:
        return [self.tensors[n] for n in GRAD_INPUTS if n in self.tensors]


GRAD_INPUTS = ("q", "k", "v", "bias")


def sample(name: str, seed: int, grow: int = 0) -> Sample:
    return Sample(VARIANTS[name], _tensors(VARIANTS[name], seed, grow))


def run_flex(s: Sample, flex: Callable) -> Any:
    """`flex` (flex_attention, eager or compiled) on the sample, block mask built on its device."""
    from torch.nn.attention.flex_attention import create_block_mask

    v, t = s.variant, s.tensors
    heads, _, length, kv_length = v.sizes()
    length, kv_length = t["q"].shape[-2], t["k"].shape[-2]
    mask_mod = _mask_mod(v.mask, t, v.block)
    block_mask = None
    if mask_mod is not None:
        block_mask = create_block_mask(mask_mod, 1, None, length, kv_length, device=t["q"].device,
                                       BLOCK_SIZE=v.block)
    return flex(t["q"], t["k"], t["v"], score_mod=_score_mod(v.score, t), block_mask=block_mask,
                enable_gqa=v.kv_heads is not None, return_lse=v.return_lse)


def dense(s: Sample) -> Any:
    """The same attention as explicit math (dense mask and bias from the same mods), in the
    tensors' dtype: fully masked rows give 0 and a log-sum-exp of -inf, as flex_attention does."""
    v, t = s.variant, s.tensors
    q, k, val = t["q"], t["k"], t["v"]
    if v.kv_heads is not None:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        val = val.repeat_interleave(q.shape[1] // val.shape[1], dim=1)
    idx = [torch.arange(n).view(*(1 if i != d else n for i in range(4)))
           for d, n in enumerate((1, q.shape[1], q.shape[2], k.shape[2]))]
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    score_mod = _score_mod(v.score, t)
    if score_mod is not None:
        scores = score_mod(scores, *idx).to(scores.dtype)  # a float32 capture must not widen the math
    mask_mod = _mask_mod(v.mask, t, v.block)
    mask = torch.ones_like(scores, dtype=torch.bool)
    if mask_mod is not None:
        mask = mask & mask_mod(*idx)
    row_ok = mask.any(-1, keepdim=True)
    safe = torch.where(row_ok, scores.masked_fill(~mask, float("-inf")), torch.zeros_like(scores))
    lse = torch.logsumexp(safe, dim=-1, keepdim=True)
    out = (torch.exp(safe - lse) * row_ok) @ val
    if v.return_lse:
        lse = torch.where(row_ok, lse, torch.full_like(lse, float("-inf"))).squeeze(-1)
        # flex_attention returns the log-sum-exp in float32 for every input dtype
        return out, (lse.float() if lse.dtype in (torch.bfloat16, torch.float16) else lse)
    return out
