"""`torch.accelerator` calls that a Python-registered backend cannot answer through C++.

A real backend implements ``synchronizeDevice`` in its C++ device guard and a caching device
allocator; the Python device guard that sim registers offers only ``type_``, so
``torch.accelerator.synchronize()`` and the memory statistics raise on sim. Device-agnostic
code (what ``neuron-check --fix`` writes) calls exactly these, so sim answers them the way its
device module does: synchronisation is a no-op (sim kernels are synchronous) and it keeps no
allocator, so every counter is 0. Calls for any other device reach torch unchanged.
"""

from __future__ import annotations

import collections
import functools

import torch

from . import device_module
from .faults import DEVICE


def _is_sim(device) -> bool:
    if device is None:
        current = torch.accelerator.current_accelerator()
        return current is not None and current.type == DEVICE
    if isinstance(device, int):
        return _is_sim(None)
    return torch.device(device).type == DEVICE


def _index_of(device):
    return None if device is None or isinstance(device, int) else device


def _routed(original, sim_answer):
    @functools.wraps(original)
    def call(device=None, /):
        if _is_sim(device):
            return sim_answer(_index_of(device))
        return original(device)

    call.__wrapped_for_sim__ = True
    return call


def _memory_stats(device=None) -> collections.OrderedDict:
    device_module.synchronize(device)
    return collections.OrderedDict()


def _memory_info(device=None) -> tuple[int, int]:
    device_module.synchronize(device)
    return (0, 0)


_SIM_ANSWERS = {
    "synchronize": device_module.synchronize,
    "memory_stats": _memory_stats,
    "memory_allocated": device_module.memory_allocated,
    "max_memory_allocated": device_module.max_memory_allocated,
    "memory_reserved": device_module.memory_reserved,
    "max_memory_reserved": device_module.memory_reserved,
    "reset_peak_memory_stats": device_module.reset_peak_memory_stats,
    "reset_accumulated_memory_stats": device_module.reset_peak_memory_stats,
    "get_memory_info": _memory_info,
}


def install() -> None:
    """Route the calls above to sim when sim is the device asked about (idempotent)."""
    namespaces = [torch.accelerator]
    memory = getattr(torch.accelerator, "memory", None)
    if memory is not None:
        namespaces.append(memory)
    for ns in namespaces:
        for name, answer in _SIM_ANSWERS.items():
            original = getattr(ns, name, None)
            if original is not None and not getattr(original, "__wrapped_for_sim__", False):
                setattr(ns, name, _routed(original, answer))
        original = getattr(ns, "empty_cache", None)
        if original is not None and not getattr(original, "__wrapped_for_sim__", False):
            setattr(ns, "empty_cache", _routed_no_arg(original))


def _routed_no_arg(original):
    @functools.wraps(original)
    def call():
        if _is_sim(None):
            return device_module.empty_cache()
        return original()

    call.__wrapped_for_sim__ = True
    return call
