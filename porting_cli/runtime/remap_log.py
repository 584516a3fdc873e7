"""What the device remap of the porting trace shares with its library patches: the log of
remapped call sites and what counts as a CUDA device argument."""

from __future__ import annotations

import re
import sys
from collections import Counter
from typing import Any, Callable

import torch

from porting_cli.runtime.frames import UserFrames

CUDA_DEVICE = re.compile(r"^cuda(:\d+)?$")


class RemapLog:
    """Counts each remapped call by (site, what); `on_new` is told the first time of each."""

    def __init__(self, frames: UserFrames, on_new: Callable[[str | None, str], None] | None = None):
        self.frames = frames
        self.counts: Counter[tuple[str | None, str]] = Counter()
        self.on_new = on_new

    def __call__(self, what: str, direct_only: bool = False) -> None:
        """Log one remap. `direct_only`: count it only when the user's code made the call
        itself (torch.manual_seed calls torch.cuda.manual_seed_all internally; that is no
        CUDA code of the user's)."""
        if direct_only:
            caller = sys._getframe(2).f_code.co_filename
            if not self.frames.is_user(caller):
                return
        key = (self.frames.site(), what)
        self.counts[key] += 1
        if self.counts[key] == 1 and self.on_new is not None:
            self.on_new(*key)


def is_cuda_device(value: Any) -> bool:
    if isinstance(value, str):
        return bool(CUDA_DEVICE.match(value))
    return isinstance(value, torch.device) and value.type == "cuda"


def describe_device(value: Any) -> str:
    return repr(value) if isinstance(value, str) else f"torch.device({str(value)!r})"
