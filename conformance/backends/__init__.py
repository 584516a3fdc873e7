"""Backend adapters and their registry.

`get(name)` returns an adapter for a built-in backend or for one that a third
party registers in the entry-point group `neuron_check.backends` (the entry
point loads an adapter class or instance).
"""

from __future__ import annotations

import importlib.metadata
from functools import lru_cache

from conformance.backends.base import BackendAdapter, FallbackTracker
from conformance.backends.builtin import BUILTIN
from conformance.suite import load_plugin
from op_db.errors import InputError

ENTRY_POINT_GROUP = "neuron_check.backends"

__all__ = ["BackendAdapter", "FallbackTracker", "get", "names", "default_device", "split_device"]


@lru_cache(maxsize=1)
def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def refresh() -> None:
    """Forget cached entry points (after installing a plugin at run time)."""
    _entry_points.cache_clear()


def names() -> list[str]:
    """Every known backend name: built-ins first, then plugins."""
    return list(BUILTIN) + sorted(n for n in _entry_points() if n not in BUILTIN)


def split_device(device: str) -> tuple[str, int | None]:
    """'cuda:1' -> ('cuda', 1); 'sim' -> ('sim', None)."""
    name, _, index = device.strip().partition(":")
    if not index:
        return name, None
    if not index.isdigit():
        raise InputError(f"device {device!r} has a bad index; use NAME or NAME:N, for example cuda:0.")
    return name, int(index)


def get(name: str) -> BackendAdapter:
    """The adapter for a backend name (or a device string such as 'cuda:1')."""
    base, _ = split_device(name)
    if base in BUILTIN:
        return BUILTIN[base]()
    entry = _entry_points().get(base)
    if entry is None:
        raise InputError(f"unknown device {name!r}; known devices: {', '.join(names())}.")
    return load_plugin(entry, f"device {base!r}", BackendAdapter)


def default_device() -> str:
    """`neuron` when available, else the current torch.accelerator, else `sim`."""
    if get("neuron").is_available():
        return "neuron"
    import torch

    accelerator = torch.accelerator.current_accelerator()
    if accelerator is not None and accelerator.type != "sim":
        return accelerator.type
    return "sim"


def resolve(device: str | None) -> tuple[BackendAdapter, str]:
    """Adapter and full device string for a --device option (None: the default rule)."""
    device = device or default_device()
    adapter = get(device)
    _, index = split_device(device)
    return adapter, adapter.device(index)
