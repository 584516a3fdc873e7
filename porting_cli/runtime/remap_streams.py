"""CUDA streams and events, remapped to the target's device-generic `torch.Stream` / `torch.Event`.

A script that times a step with ``torch.cuda.Event(enable_timing=True)`` or runs work on a
``torch.cuda.Stream()`` gets the target device's streams and events, which every backend with
a device guard provides (`torch.accelerator`), so its timings and orderings hold there too.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch


class _OnTarget(type):
    """A stand-in class for torch.cuda.Event / torch.cuda.Stream: calling it makes the target's
    device-generic object, and `isinstance` (which library code asks of torch.cuda's classes)
    recognises those objects on the target."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls.generic) and getattr(obj, "device", None) is not None and \
            torch.device(obj.device).type == cls.device_type


def _stand_in(name: str, generic: type, device_type: str, make: Callable[..., Any]) -> type:
    return _OnTarget(name, (), {"generic": generic, "device_type": device_type, "__new__": make})


def stream_patches(device_type: str, log: Callable[..., None]) -> list[tuple[Any, str, Any]]:
    """(owner, name, replacement) for torch.cuda's stream and event API."""

    def event(cls: type, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:
        log(f"torch.cuda.Event -> torch.Event({device_type!r})")
        return torch.Event(device_type, enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)

    def stream(cls: type, device: Any = None, priority: int = 0, **_kwargs: Any) -> torch.Stream:
        log(f"torch.cuda.Stream -> torch.Stream({device_type!r})")
        return torch.Stream(device=device_type, priority=priority)

    def current_stream(device: Any = None) -> torch.Stream:
        log(f"torch.cuda.current_stream() -> torch.accelerator.current_stream() on {device_type}")
        return torch.accelerator.current_stream()

    @contextlib.contextmanager
    def use_stream(s: torch.Stream | None):
        log(f"torch.cuda.stream() -> the {device_type} stream")
        if s is None:
            yield
            return
        previous = torch.accelerator.current_stream()
        torch.accelerator.set_stream(s)
        try:
            yield s
        finally:
            torch.accelerator.set_stream(previous)

    return [(torch.cuda, "Event", _stand_in("Event", torch.Event, device_type, event)),
            (torch.cuda, "Stream", _stand_in("Stream", torch.Stream, device_type, stream)),
            (torch.cuda, "current_stream", current_stream), (torch.cuda, "default_stream", current_stream),
            (torch.cuda, "stream", use_stream)]
