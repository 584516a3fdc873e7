"""The CPU reference of a Diffusers model that attends through flex attention: the same attention
written as explicit math, so its backward can be judged.

AnyFlow FAR's causal processor, Kandinsky 6 SR's NABLA processor and the LTX-2 diffusion decoder's
neighborhood processor express their sparsity as a `BlockMask`, which only Diffusers' `flex` backend
consumes: each refuses any other attention backend (`set_attention_backend("native")` raises
ValueError, or the processor always dispatches on `flex`), so Diffusers offers no dense path to
judge them against. On the CPU, PyTorch refuses flex attention with gradients ("FlexAttention does
not support backward on CPU"), so their backwards had no reference.

Inside `dense_flex_on_cpu()`, a `flex_attention` call on CPU tensors is computed as the flex suite's
reference computes it (conformance/flex/variants.py): a dense score matrix, the `score_mod` applied
to every element (vmapped over batch, head, query and key index, as PyTorch's own dense kernel
applies it), the dense mask the `BlockMask` stands for (its blocks, and its `mask_mod` inside the
partial ones), a softmax, a matmul; fully masked rows give 0. Autograd differentiates that math.
Calls on any other device (the device under test) go to PyTorch's `flex_attention` unchanged.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any


@contextlib.contextmanager
def dense_flex_on_cpu():
    """`torch.nn.attention.flex_attention.flex_attention` on CPU tensors as explicit math, inside the block.
    Diffusers' flex backend looks the function up on that module at every call."""
    import torch.nn.attention.flex_attention as api

    stock = api.flex_attention

    def flex_attention(query, key, value, *args, **kwargs):
        if query.device.type == "cpu":
            return dense_flex(query, key, value, *args, **kwargs)
        return stock(query, key, value, *args, **kwargs)

    api.flex_attention = flex_attention
    try:
        yield
    finally:
        api.flex_attention = stock


def with_dense_flex(run):
    """`run(model, inputs)` inside `dense_flex_on_cpu()`: its CPU runs (the reference, the oracle)
    attend by explicit math, its device runs through the device's flex attention."""
    import functools

    @functools.wraps(run)
    def wrapped(model, inputs):
        with dense_flex_on_cpu():
            return run(model, inputs)

    return wrapped


def dense_flex(query, key, value, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
               return_lse=False, kernel_options=None, return_aux=None, **_: Any):
    """flex_attention's result (and log-sum-exp where asked) as explicit math in the inputs' dtype."""
    import torch

    del kernel_options  # tiles of a kernel; no meaning for the math
    if enable_gqa and key.shape[1] != query.shape[1]:
        key = key.repeat_interleave(query.shape[1] // key.shape[1], dim=1)
        value = value.repeat_interleave(query.shape[1] // value.shape[1], dim=1)
    batch, heads, length, width = query.shape
    kv_length = key.shape[-2]
    scale = 1.0 / math.sqrt(width) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    indices = [torch.arange(n, device=query.device) for n in (batch, heads, length, kv_length)]
    if score_mod is not None:
        scores = _vmapped(score_mod)(scores, *indices).to(scores.dtype)
    mask = None if block_mask is None else dense_mask(block_mask, batch, heads, length, kv_length)
    if mask is None:
        lse = torch.logsumexp(scores, dim=-1, keepdim=True)
        out = torch.exp(scores - lse) @ value
    else:
        row_ok = mask.any(-1, keepdim=True)
        safe = torch.where(row_ok, scores.masked_fill(~mask, float("-inf")), torch.zeros_like(scores))
        lse = torch.logsumexp(safe, dim=-1, keepdim=True)
        out = (torch.exp(safe - lse) * row_ok) @ value
        lse = torch.where(row_ok, lse, torch.full_like(lse, float("-inf")))
    lse = lse.squeeze(-1)
    lse = lse.float() if lse.dtype in (torch.bfloat16, torch.float16) else lse  # flex's is float32 at least
    if return_aux is not None and getattr(return_aux, "lse", False):
        from torch.nn.attention.flex_attention import AuxOutput

        return out, AuxOutput(lse=lse)
    return (out, lse) if return_lse else out


def dense_mask(block_mask, batch: int, heads: int, length: int, kv_length: int):
    """The boolean (batch, heads, length, kv_length) mask a BlockMask stands for: full blocks
    attend whole, partial blocks where the mask_mod allows, every other block not at all."""
    import torch
    from torch.nn.attention.flex_attention import create_mask

    q_block, kv_block = block_mask.BLOCK_SIZE

    def expand(blocks):  # (B, H, Q blocks, KV blocks) -> (B, H, length, kv_length), broadcast B and H
        dense = blocks.repeat_interleave(q_block, dim=-2).repeat_interleave(kv_block, dim=-1)
        return dense[..., :length, :kv_length].expand(batch, heads, length, kv_length)

    kv_blocks = -(-kv_length // kv_block)
    partial = expand(_blocks(block_mask.kv_num_blocks, block_mask.kv_indices, kv_blocks))
    mask_b, mask_h = block_mask.kv_num_blocks.shape[:2]
    allowed = create_mask(block_mask.mask_mod, mask_b, mask_h, length, kv_length, device=partial.device)
    mask = partial & allowed.expand(batch, heads, length, kv_length)
    if block_mask.full_kv_num_blocks is not None:
        mask = mask | expand(_blocks(block_mask.full_kv_num_blocks, block_mask.full_kv_indices, kv_blocks))
    return mask


def _blocks(num_blocks, indices, kv_blocks: int):
    """Boolean (B, H, Q blocks, KV blocks) table of the first `num_blocks` entries of each row of `indices`."""
    import torch

    taken = torch.arange(indices.shape[-1], device=indices.device) < num_blocks.unsqueeze(-1)
    table = torch.zeros(*indices.shape[:-1], kv_blocks + 1, dtype=torch.bool, device=indices.device)
    # entries past num_blocks go to a spare column, dropped below
    table.scatter_(-1, torch.where(taken, indices.long(), kv_blocks), True)
    return table[..., :kv_blocks]


def _vmapped(score_mod):
    """`score_mod(score, b, h, q, kv)` over a whole (B, H, Q, KV) score matrix: one vmap per index,
    the innermost over kv, as PyTorch's dense kernel maps it."""
    from torch.func import vmap

    fn = score_mod
    for dim in (3, 2, 1, 0):
        fn = vmap(fn, in_dims=(0, *(0 if i == dim else None for i in range(4))), out_dims=0)
    return fn
