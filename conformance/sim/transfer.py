"""Copies between the CPU and `sim` without the dispatcher round trip.

`t.to("sim")` enters the dispatcher, reaches the boxed PrivateUse1 fallback in Python and
comes back out through `_run`; that costs more than the copy itself on the small tensors
OpInfo samples hold, and the harness moves every sample tensor both ways. With no profile
active the result is the same object either way (a SimTensor around a CPU clone, or a CPU
clone of the held tensor), so these functions build it directly. Anything else -- a profile
(whose faults and dtype refusals apply to transfers too), a tensor that requires grad, a
lazy conjugate or negative bit, a non-strided layout, a traced inner tensor -- takes the
ordinary `.to` path.
"""

from __future__ import annotations

import torch

from . import faults
from .tensor import SimTensor, _holds_real_data


def _plain(t: torch.Tensor) -> bool:
    return not (t.requires_grad or t.is_conj() or t.is_neg()) and t.layout == torch.strided


def to_sim(t: torch.Tensor) -> torch.Tensor:
    """A copy of CPU tensor `t` on sim: what `t.to("sim", copy=True)` gives."""
    if type(t) is torch.Tensor and t.device.type == "cpu" and _plain(t) and faults.active_profile() is None:
        return SimTensor(t.clone())
    return t.to(faults.DEVICE, copy=True)


def to_cpu(t: torch.Tensor) -> torch.Tensor:
    """A copy of sim tensor `t` on the CPU, outside autograd: what `t.detach().to("cpu")` gives."""
    if type(t) is SimTensor and _holds_real_data(t) and _plain(t) and _plain(t._cpu) and faults.active_profile() is None:
        return t._cpu.clone()
    return t.detach().to("cpu") if t.requires_grad else t.to("cpu")
