"""Why a model's CPU reference failed, in words a newcomer can act on.

A REF_ERROR says nothing about the backend, but it hides the model from coverage, so its
message must say whether the model itself is at fault. Two failures of a 16-bit item are the
model's own whenever its float32 run passes, and the message then says so plainly:

* it mixes dtypes: the model makes or casts a tensor to float32 itself (a positional table, a
  router in float32 without listing it in `_keep_in_fp32_modules_strict`), or holds a layer
  that `.to()` does not reach, and mixes it with tensors of the item's dtype, so it cannot run
  cast that way on any device;
* the CPU has no kernel in the dtype for an op it calls (`torch.fft` has none for bfloat16).

The rules are data: (pattern of the exception text, what it means).
"""

from __future__ import annotations

import re
from collections.abc import Callable

MIXED_DTYPES = ("the model hard-codes float32 inside: it makes or casts a tensor to float32 itself, or holds a "
                "layer that `.to({dtype})` does not reach, and mixes it with {dtype} ones, so it cannot run cast to "
                "{dtype} on the CPU or on any device (its float32 run passes)")
NO_CPU_KERNEL = ("an op the model calls has no {dtype} kernel on the CPU, so there is no {dtype} reference "
                 "to judge the device by (its float32 run passes)")

RULES: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"must have the same dtype|to have the same dtype|and bias type \(.*\) should be the same"
                r"|expected scalar type \w+ but found \w+|Input type \(.*\) and weight type"), MIXED_DTYPES),
    (re.compile(r"Unsupported dtype (BFloat16|Half)|not implemented for '(BFloat16|Half)'"), NO_CPU_KERNEL),
)


# Failures that need no second run to be understood: (pattern, what it means).
KNOWN: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"use `model\.train\(\)`"),
     "the model computes gradients only in training mode (reversible layers that rerun the forward in the "
     "backward), and the suite runs every model in eval mode so that dropout cannot differ between the CPU "
     "and the device: its backward is not checked"),
)

ONE_SAMPLE = ("the model fails on the CPU for a batch of {batch} but runs one sample: a batching bug in the "
              "model (it shapes a tensor as if the batch were 1)")


def explain(error: str, dtype, run_in_float32: Callable[[], object], run_one_sample: Callable[[], object]) -> str:
    """The message of a CPU reference that raised `error` in `dtype`: the cause first where a
    rule names it and a second CPU run confirms it (in float32 for the dtype rules, on the
    first sample of every input for a batching bug; each callable raises if its run fails),
    then the exception."""
    import torch

    from conformance.models.tokens import BATCH

    for pattern, meaning in KNOWN:
        if pattern.search(error):
            return f"CPU reference failed: {meaning}: {error}"
    if dtype in (torch.bfloat16, torch.float16):
        for pattern, meaning in RULES:
            if pattern.search(error) and _passes(run_in_float32):
                return f"CPU reference failed: {meaning.format(dtype=str(dtype).removeprefix('torch.'))}: {error}"
    if _passes(run_one_sample):
        return f"CPU reference failed: {ONE_SAMPLE.format(batch=BATCH)}: {error}"
    return f"CPU reference failed: {error}"


def first_sample(inputs: dict):
    """`inputs` cut to their first sample: every tensor whose first dimension is the batch."""
    import torch
    from torch.utils import _pytree as pytree

    from conformance.models.tokens import BATCH

    return pytree.tree_map(lambda t: t[:1] if isinstance(t, torch.Tensor) and t.ndim and t.shape[0] == BATCH else t,
                           inputs)


def _passes(run: Callable[[], object]) -> bool:
    try:
        run()
    except Exception:  # noqa: BLE001 - the float32 run fails too: the dtype is not the cause
        return False
    return True
