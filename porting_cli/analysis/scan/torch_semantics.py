"""What the installed PyTorch makes of the code the rules read.

Some rules depend on PyTorch's semantics, and those changed between releases. A bare integer
device (`torch.device(0)`, `x.to(local_rank)`, `device=0`) meant CUDA device N up to torch 2.4;
from torch 2.5 it means device N of the *current accelerator* (pytorch/pytorch#129119, "Refine the
logic of device construction when only device index is given"; safetensors#509 adapted to the same
change), so on a backend such as TorchNeuron, or `sim` in this project's tests, `torch.device(0)`
is `neuron:0` / `sim:0` (measured on torch 2.13 with sim registered). On such a torch an integer
device is no change to make.

The version is read from the installed distribution's metadata, never by importing torch: the
static scan stays fast and torch-free. No torch installed: the old (CUDA) meaning, which is what
the script means on the torch its authors ran.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import re

#: the first release where a bare integer device is the current accelerator's device N
INTEGER_DEVICE_IS_ACCELERATOR = (2, 5)


@dataclasses.dataclass(frozen=True)
class TorchSemantics:
    """The PyTorch whose meaning the rules state: its version, None when unknown."""

    version: tuple[int, int] | None = None

    @property
    def integer_device_is_accelerator(self) -> bool:
        return self.version is not None and self.version >= INTEGER_DEVICE_IS_ACCELERATOR

    def describe(self) -> str:
        return "an unknown torch" if self.version is None else f"torch {self.version[0]}.{self.version[1]}"


def parse_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of a version string such as ``2.13.0+cpu`` or ``2.5.0a0``."""
    m = re.match(r"\s*(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


@functools.cache
def installed() -> TorchSemantics:
    """The semantics of the torch installed next to neuron-check (the scan cache's key includes
    the installed distributions, so a result is never reused under another torch)."""
    try:
        return TorchSemantics(parse_version(importlib.metadata.version("torch")))
    except importlib.metadata.PackageNotFoundError:
        return TorchSemantics(None)
