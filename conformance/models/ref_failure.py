"""Why a model's CPU reference failed, in words a newcomer can act on.

A REF_ERROR says nothing about the backend, but it hides the model from coverage, so its
message must say whether the model itself is at fault. Two failures of a 16-bit item are the
model's own whenever its float32 run passes, and the message then says so plainly:

* it mixes dtypes: the model makes or casts a tensor to float32 itself (a positional table, a
  router in float32 without listing it in `_keep_in_fp32_modules_strict`) and feeds it to a
  layer cast to the item's dtype, so it cannot run cast that way on any device;
* the CPU has no kernel in the dtype for an op it calls (`torch.fft` has none for bfloat16).

The rules are data: (pattern of the exception text, what it means).
"""

from __future__ import annotations

import re
from collections.abc import Callable

MIXED_DTYPES = ("the model hard-codes float32 inside: it makes or casts a tensor to float32 itself and feeds it "
                "to a layer cast to {dtype}, so it cannot run cast to {dtype} on the CPU or on any device "
                "(its float32 run passes)")
NO_CPU_KERNEL = ("an op the model calls has no {dtype} kernel on the CPU, so there is no {dtype} reference "
                 "to judge the device by (its float32 run passes)")

RULES: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"must have the same dtype|to have the same dtype|and bias type \(.*\) should be the same"
                r"|expected scalar type \w+ but found \w+|Input type \(.*\) and weight type"), MIXED_DTYPES),
    (re.compile(r"Unsupported dtype (BFloat16|Half)|not implemented for '(BFloat16|Half)'"), NO_CPU_KERNEL),
)


def explain(error: str, dtype, run_in_float32: Callable[[], object]) -> str:
    """The message of a CPU reference that raised `error` in `dtype`: the cause first where a
    rule names it and the float32 run (`run_in_float32`, raising if it fails) confirms it is
    the dtype's doing, then the exception."""
    import torch

    if dtype in (torch.bfloat16, torch.float16):
        for pattern, meaning in RULES:
            if pattern.search(error) and _passes(run_in_float32):
                return f"CPU reference failed: {meaning.format(dtype=str(dtype).removeprefix('torch.'))}: {error}"
    return f"CPU reference failed: {error}"


def _passes(run: Callable[[], object]) -> bool:
    try:
        run()
    except Exception:  # noqa: BLE001 - the float32 run fails too: the dtype is not the cause
        return False
    return True
