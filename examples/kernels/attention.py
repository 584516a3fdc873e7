"""A tiled "flash" attention: keys in tiles of TILE, an online softmax (running max and sum),
float32 accumulation; and the plain reference it must match.

q [B, Hq, S, D], k and v [B, Hkv, Sk, D] with Hq a multiple of Hkv (GQA); causal masks are
aligned to the end: query i sees keys j <= i + Sk - S.
"""

from __future__ import annotations

import math

import torch

TILE = 32


def reference(q, k, v, causal: bool = False, scale: float | None = None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    k, v = _repeat_heads(k, q), _repeat_heads(v, q)
    scores = (q @ k.transpose(-1, -2)) * scale
    if causal:
        scores = scores.masked_fill(~_visible(q.shape[-2], k.shape[-2], 0, q.device), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def tiled(q, k, v, causal: bool = False, scale: float | None = None, *, bugs: frozenset = frozenset()):
    scale, shift = _kernel_scale(q, scale, bugs), _kernel_shift(bugs)
    out_dtype = q.dtype
    q, k, v = q.float(), _repeat_heads(k, q).float(), _repeat_heads(v, q).float()
    rows, keys = q.shape[-2], k.shape[-2]
    running_max = torch.full((*q.shape[:-1], 1), float("-inf"), device=q.device)
    running_sum = torch.zeros((*q.shape[:-1], 1), device=q.device)
    acc = torch.zeros(q.shape, device=q.device)
    for start in range(0, keys, TILE):
        scores = (q @ k[..., start:start + TILE, :].transpose(-1, -2)) * scale
        if causal:
            visible = _visible(rows, keys, start, q.device, shift)[:, : scores.shape[-1]]
            scores = scores.masked_fill(~visible, float("-inf"))
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
        safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        weights = torch.exp(scores - safe_max)
        correction = torch.exp(running_max - safe_max)
        running_sum = running_sum * correction + weights.sum(dim=-1, keepdim=True)
        acc = acc * correction + weights @ v[..., start:start + TILE, :]
        running_max = new_max
    return (acc / running_sum).to(out_dtype)


def backward(q, k, v, grad, causal: bool = False, scale: float | None = None, *, bugs: frozenset = frozenset()):
    """The attention backward in closed form, float32 inside, with the kernel's own scale and mask
    (so a bug in them shows in the gradients too): P = softmax(S), dV = P^T dO,
    dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K scale, dK = dS^T Q scale; heads shared by GQA
    sum their gradients."""
    scale, shift = _kernel_scale(q, scale, bugs), _kernel_shift(bugs)
    kr, vr, dout = _repeat_heads(k, q).float(), _repeat_heads(v, q).float(), grad.float()
    scores = (q.float() @ kr.transpose(-1, -2)) * scale
    if causal:
        scores = scores.masked_fill(~_visible(q.shape[-2], k.shape[-2], 0, q.device, shift), float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    dscores = probs * (dout @ vr.transpose(-1, -2) - (dout * (probs @ vr)).sum(-1, keepdim=True))
    dq = (dscores @ kr) * scale
    dk, dv = (dscores.transpose(-1, -2) @ q.float()) * scale, probs.transpose(-1, -2) @ dout
    groups = q.shape[1] // k.shape[1]
    dk, dv = (t.unflatten(1, (k.shape[1], groups)).sum(2) for t in (dk, dv))
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def _kernel_scale(q, scale, bugs):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if "bf16_scale" in bugs and q.dtype == torch.bfloat16:
        return 1.0 / q.shape[-1]  # the bug: 1/D instead of 1/sqrt(D) on the bf16 path
    return scale


def _kernel_shift(bugs) -> int:
    return 1 if "causal_off_by_one" in bugs else 0  # the bug: each query sees one key too many


def _repeat_heads(kv, q):
    return kv.repeat_interleave(q.shape[1] // kv.shape[1], dim=1) if kv.shape[1] != q.shape[1] else kv


def _visible(rows: int, keys: int, start: int, device, shift: int = 0):
    """[rows, keys - start]: query i sees key start + j when start + j <= i + keys - rows (+ shift)."""
    query = torch.arange(rows, device=device)[:, None]
    key = torch.arange(start, keys, device=device)[None, :]
    return key <= query + (keys - rows) + shift
