"""The sim runtime's C++ half, loaded (and built, the first time) once per process."""

from __future__ import annotations

from types import ModuleType

_module: ModuleType | None = None


def module() -> ModuleType:
    global _module
    if _module is None:
        from .build import load

        _module = load()
    return _module


def is_loaded() -> bool:
    return _module is not None


def apply_profile(profile) -> None:
    """Hand the C++ runtime the parts of `profile` it enforces itself: the dtypes tensor
    creation refuses, the number of devices and the event_timing fault."""
    import torch

    lib = module()
    refused = profile.unsupported_dtypes if profile is not None else ()
    lib.set_refused_dtypes([getattr(torch, name) for name in refused])
    scale = profile.event_timing_scale if profile is not None else None
    lib.set_event_time_scale(1.0 if scale is None else scale)
    lib.set_device_count(profile.devices if profile is not None else 1)
