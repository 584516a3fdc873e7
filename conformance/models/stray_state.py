"""Model state that `Module.to(device, dtype)` does not reach: a model bug, not the backend's.

`Module.to()` moves and casts registered parameters, buffers and submodules. A model that keeps
a layer in a plain Python list (not an `nn.ModuleList`) or a tensor in a plain attribute (not a
buffer) leaves it on the CPU in float32, and its forward then mixes devices on any accelerator,
CUDA included, or mixes dtypes in any low-precision copy, the CPU's too. A run that fails so
while such state exists says nothing about the backend: the runner reports it as REF_ERROR with
the state named (DESIGN.md: a model bug that fails everywhere is justified, with its reason).

Zero-dimensional tensors are not stray: PyTorch accepts a CPU scalar tensor beside any other.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

# The words of PyTorch's device checks ("Expected all tensors to be on the same device",
# cdist's "X1 and X2 must have the same device type") and dtype checks ("Input type (c10::BFloat16)
# and bias type (float) should be the same", "expected scalar type ... but found ...", and every
# message naming a dtype: "expected m1 and m2 to have the same dtype", "same dtype" of dot).
_MIXED = re.compile(r"same device|device type|type .* should be the same|expected scalar type|dtype", re.IGNORECASE)
_REGISTERED = ("_parameters", "_buffers", "_modules")


def is_mixed_placement(exc: BaseException) -> bool:
    """Whether `exc` is PyTorch's complaint that an op got tensors of two devices or dtypes."""
    return bool(_MIXED.search(str(exc)))


def stray_state(model: Any, device_type: str, dtype: Any, limit: int = 3) -> list[str]:
    """Where `model`, after `.to(device_type, dtype)`, still holds a tensor that call could not
    reach (on another device, or floating in another dtype), as readable paths (at most
    `limit`); [] when everything it holds followed."""
    def stray(t: Any) -> bool:
        return bool(t.ndim) and (t.device.type != device_type or (t.is_floating_point() and t.dtype != dtype))

    found: dict[str, list[str]] = {}  # what -> where, so a list of layers reads as one phrase
    count = 0
    for name, module in model.named_modules():
        for attr, value in vars(module).items():
            if attr in _REGISTERED:
                continue
            for where, what in _unregistered(value, f"{name}.{attr}" if name else attr, stray):
                found.setdefault(what, []).append(where)
                count += 1
                if count >= limit:
                    return _phrases(found)
    return _phrases(found)


def _phrases(found: dict[str, list[str]]) -> list[str]:
    return [f"{', '.join(wheres)} ({what})" for what, wheres in found.items()]


def _unregistered(value: Any, path: str, stray) -> Iterator[tuple[str, str]]:
    """(path, what) of each stray tensor, or module holding one, inside one plain attribute."""
    import torch

    if isinstance(value, torch.Tensor):
        if stray(value):
            yield path, "tensor in a plain attribute, not a buffer"
    elif isinstance(value, torch.nn.Module):  # set past Module.__setattr__, so never registered
        yield from _held(value, path, "attribute", stray)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _held(item, f"{path}[{i}]", type(value).__name__, stray)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _held(item, f"{path}[{key!r}]", "dict", stray)


def _held(item: Any, path: str, container: str, stray) -> Iterator[tuple[str, str]]:
    import torch

    if isinstance(item, torch.Tensor):
        if stray(item):
            yield path, f"tensor in a plain {container}"
    elif isinstance(item, torch.nn.Module):
        if any(stray(t) for t in (*item.parameters(), *item.buffers())):
            yield path, f"module in a plain {container}, not an nn.ModuleList/ModuleDict"


def model_bug(model: Any, device_type: str, dtype: Any, failure: BaseException | None) -> str | None:
    """The REF_ERROR message of `failure`, raised by `model` after `.to(device_type, dtype)`, where
    it is a device or dtype mix on state `.to()` did not reach; None where the model is not to blame."""
    from op_db.records import shorten

    if model is None or failure is None or not is_mixed_placement(failure):
        return None
    stray = stray_state(model, device_type, dtype)
    if not stray:
        return None
    return shorten(f"model bug, not the backend's: Module.to() does not move or cast {', '.join(stray)}, so the "
                   f"model mixes devices or dtypes wherever it is moved or cast (on CUDA too): "
                   f"{type(failure).__name__}: {str(failure).strip()}")
