"""CUDA streams and events, remapped to the target's device-generic `torch.Stream` / `torch.Event`.

A script that times a step with ``torch.cuda.Event(enable_timing=True)`` or runs work on a
``torch.cuda.Stream()`` gets the target device's streams and events, which every backend with
a device guard provides (`torch.accelerator`), so its timings and orderings hold there too.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch


def stream_patches(device_type: str, log: Callable[..., None]) -> list[tuple[Any, str, Any]]:
    """(owner, name, replacement) for torch.cuda's stream and event API."""

    def event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:
        log(f"torch.cuda.Event -> torch.Event({device_type!r})")
        return torch.Event(device_type, enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)

    def stream(device: Any = None, priority: int = 0, **_kwargs: Any) -> torch.Stream:
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

    return [(torch.cuda, "Event", event), (torch.cuda, "Stream", stream),
            (torch.cuda, "current_stream", current_stream), (torch.cuda, "default_stream", current_stream),
            (torch.cuda, "stream", use_stream)]
