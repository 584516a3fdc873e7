"""The profiler trace's link from torch.profiler events to the user's source lines.

A TorchFunctionMode wraps every top-level torch call the script makes (a torch function, a
Tensor method, an operator) in a `record_function` range named ``nc|N``, where N indexes a
table of (user site, call chain, kind, copy bytes). The site is the innermost user frame
(porting_cli/runtime/frames.py), so calls made inside `nn.Module.__call__`, library helpers and
the user's own helpers land on the user's line. Every aten event nested in an ``nc|N`` range
belongs to that line; backward events (on the autograd engine's thread) are linked to their
forward op through the autograd sequence number torch.profiler records, and the backward()
call's own range gives the line their total goes to.

Kinds: "" (compute), "sync:item|tolist|cpu|numpy|print|synchronize" (the host waits for the
device), "copy" (a host<->device copy: .to / .cpu / .cuda / copy_ across devices).
"""

from __future__ import annotations

import sys
from typing import Any

RANGE_PREFIX = "nc|"
CHAIN_DEPTH = 8
_SYNC_METHODS = {"item": "item", "tolist": "tolist", "numpy": "numpy", "__repr__": "print",
                 "__format__": "print", "__str__": "print"}


def make_site_mode(frames: Any, device_type: str):
    """The TorchFunctionMode that names each top-level torch call's user line (see module doc)."""
    import torch
    from torch.compiler import is_compiling
    from torch.overrides import TorchFunctionMode

    class SiteMode(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.sites: list[dict[str, Any]] = []
            self._index: dict[tuple, int] = {}

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if is_compiling():  # Dynamo tracing the script: stay out of its graph (no frames, no ranges)
                return func(*args, **kwargs)
            name = getattr(func, "__name__", "")
            if name == "__get__":  # attribute reads (.shape, .grad): not a call worth a range
                return func(*args, **kwargs)
            kind, nbytes = classify_call(name, args, kwargs, device_type)
            frame = sys._getframe(1)
            site = frames.innermost(frame)
            key = (site, kind, nbytes, id(frame.f_code) if site is None else 0)
            index = self._index.get(key)
            if index is None:
                index = self._index[key] = len(self.sites)
                self.sites.append({"site": site, "kind": kind, "bytes": nbytes, "call": name,
                                   "chain": user_chain(frames, frame)})
            with torch.profiler.record_function(f"{RANGE_PREFIX}{index}"):
                return func(*args, **kwargs)

    return SiteMode()


def classify_call(name: str, args: Any, kwargs: Any, device_type: str) -> tuple[str, int]:
    """("sync:..."|"copy"|"", bytes copied) for one torch call."""
    import torch

    first = args[0] if args else None
    if not isinstance(first, torch.Tensor):
        return "", 0
    on_device = first.device.type == device_type and device_type != "cpu"
    if name in _SYNC_METHODS:
        return (f"sync:{_SYNC_METHODS[name]}", _nbytes(first) if name != "item" else first.element_size()) \
            if on_device else ("", 0)
    if name in ("cpu", "to", "cuda", "copy_"):
        target = _target_device(name, args, kwargs)
        source = first.device.type if name != "copy_" else _device_type(args[1] if len(args) > 1 else None)
        if target is not None and source is not None and (target == "cpu") != (source == "cpu"):
            kind = "sync:cpu" if target == "cpu" and name != "copy_" else "copy"
            return kind, _nbytes(first if name != "copy_" else args[1])
    return "", 0


def _target_device(name: str, args: Any, kwargs: Any) -> str | None:
    import torch

    if name == "cpu":
        return "cpu"
    if name == "copy_":
        return args[0].device.type
    if name == "cuda":
        return "cuda"
    for value in [*args[1:], kwargs.get("device")]:
        if isinstance(value, torch.Tensor):
            return value.device.type
        if isinstance(value, (str, torch.device)):
            try:
                return torch.device(value).type
            except (RuntimeError, TypeError):
                return None
    return None


def _device_type(value: Any) -> str | None:
    import torch

    return value.device.type if isinstance(value, torch.Tensor) else None


def _nbytes(t: Any) -> int:
    return int(t.numel() * t.element_size())


def user_chain(frames: Any, frame: Any) -> list[str]:
    """Every user frame of the stack, innermost first (at most CHAIN_DEPTH)."""
    chain = []
    while frame is not None and len(chain) < CHAIN_DEPTH:
        if frames.is_user(frame.f_code.co_filename):
            chain.append(f"{frames.format(frame.f_code.co_filename, frame.f_lineno)} in {frame.f_code.co_name}")
        frame = frame.f_back
    return chain
