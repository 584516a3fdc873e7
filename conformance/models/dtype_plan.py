"""Casting a model to an item's dtype the way a user loading it would.

`from_pretrained(..., dtype=torch.bfloat16)` does not cast every weight: a model class lists
the parameters it computes in float32 whatever the dtype (`_keep_in_fp32_modules_strict`: MoE
router weights and score-correction biases, recurrent cells), and those it keeps in float32 in
float16 only (`_keep_in_fp32_modules`, against float16's narrow range). Its forward then casts
activations up for them itself. A plain `model.to(torch.bfloat16)` casts them too, and the model
fails on any device with "expected m1 and m2 to have the same dtype". So the CPU reference and
the device copy are both cast this way; the float64 oracle is cast whole, as Transformers does.
"""

from __future__ import annotations

import re
from typing import Any


def cast_model(model: Any, device: Any, dtype: Any) -> Any:
    """`model` (in place) on `device` in `dtype`, with the weights its class keeps in float32
    left in float32."""
    import torch

    model = model.to(device=device, dtype=dtype)
    kept = kept_in_float32(model, dtype)
    if kept is None:
        return model
    for module_name, module in model.named_modules():
        prefix = f"{module_name}." if module_name else ""
        for name, param in module.named_parameters(recurse=False):
            if param.is_floating_point() and kept.search(prefix + name):
                param.data = param.data.to(torch.float32)  # the same Parameter: ties stay tied
        for name, buffer in module.named_buffers(recurse=False):
            if buffer is not None and buffer.is_floating_point() and kept.search(prefix + name):
                module._buffers[name] = buffer.to(torch.float32)
    return model


def kept_in_float32(model: Any, dtype: Any):
    """The pattern of weight names a Transformers model keeps in float32 when loaded in `dtype`
    (Transformers' own rule: its names, `*` as a wildcard, searched in each weight's full name),
    or None."""
    import torch

    if not _is_transformers_model(model) or dtype not in (torch.float16, torch.bfloat16):
        return None
    names = set(getattr(model, "_keep_in_fp32_modules_strict", None) or ())
    if dtype == torch.float16:
        names |= set(getattr(model, "_keep_in_fp32_modules", None) or ())
    if not names:
        return None
    return re.compile("|".join(f"(?:{name.replace('*', '.*')})" for name in sorted(names)))


def _is_transformers_model(model: Any) -> bool:
    try:
        from transformers import PreTrainedModel
    except ImportError:
        return False
    return isinstance(model, PreTrainedModel)
