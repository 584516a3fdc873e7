"""CPU vs target outputs of a script's `get_model_and_inputs()`, by the numerics rule.

Three copies of the model run the same inputs without gradients, in eval mode: on the target,
on the CPU in the same dtype, and on the CPU in float64 (the oracle of DESIGN.md's rule). When
the outputs break the rule, conformance/models/first_divergence.py names the first divergent module.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.models.first_divergence import locate
from conformance.numerics import compare


def _moved(value: Any, device: str, float64: bool = False) -> Any:
    def move(leaf: Any) -> Any:
        if not isinstance(leaf, torch.Tensor):
            return leaf
        leaf = leaf.detach().to(device)
        return leaf.double() if float64 and leaf.is_floating_point() else leaf

    return pytree.tree_map(move, value)


def _call(model: torch.nn.Module, inputs: Any) -> Any:
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def _tensor_leaves(output: Any) -> list[torch.Tensor]:
    """The tensors of a model output; caches and other objects (DynamicCache) are not results."""
    return [leaf for leaf in pytree.tree_leaves(output) if isinstance(leaf, torch.Tensor)]


def first_divergence(model: torch.nn.Module, inputs: Any, target: str) -> dict[str, Any]:
    """{"status": PASS|MISMATCH, errors, and the first divergent module on a mismatch}."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError("get_model_and_inputs() must return (nn.Module, inputs)")
    model = model.to("cpu").eval()
    ref_model, dev_model, hi_model = model, copy.deepcopy(model).to(target), copy.deepcopy(model).double()
    ref_in, dev_in, hi_in = _moved(inputs, "cpu"), _moved(inputs, target), _moved(inputs, "cpu", True)
    with torch.no_grad():
        dev_out, ref_out, hi_out = _call(dev_model, dev_in), _call(ref_model, ref_in), _call(hi_model, hi_in)
        result = compare(_tensor_leaves(dev_out), _tensor_leaves(ref_out), _tensor_leaves(hi_out))
        found = {
            "status": "PASS" if result.ok else "MISMATCH",
            "reason": result.reason,
            "max_abs_err": result.max_abs_err,
            "max_rel_err": result.max_rel_err,
            "err_ratio": result.err_ratio,
            "module": None,
        }
        if not result.ok:
            where = locate(lambda: _call(dev_model, dev_in), dev_model, lambda: _call(ref_model, ref_in),
                           ref_model, lambda: _call(hi_model, hi_in), hi_model)
            if where is not None:
                found.update(module=where.module, module_class=where.class_name, module_reason=where.reason,
                             router=where.router)
    return found
