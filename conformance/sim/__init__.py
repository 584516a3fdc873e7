"""The embedded stand-in device `sim`: a native, CPU-backed PrivateUse1 backend with coverage profiles.

The C++ runtime (csrc/, built and cached by build.py) registers the allocator, device guard,
streams, events, generators, hooks and the native kernels when it is loaded; fallback.py runs
every other aten op on CPU views of sim memory, with the active profile applied (faults.py).

Public API::

    register()                      load the runtime, rename PrivateUse1 to "sim", register
                                    torch.sim, tensor/module/storage methods, the fallback,
                                    autocast and the `sim` c10d backend (idempotent)
    load_profile(path_or_dict)      -> SimProfile (raises op_db.errors.InputError)
    set_profile(profile_or_None), active_profile()
    fallback_log(), reset_fallback_log()
    DEVICE = "sim"

`register()` loads the profile named by the environment variable NEURON_CHECK_SIM_PROFILE,
if set, so worker processes inherit their parent's profile.
"""

from __future__ import annotations

import os

from .faults import (
    DEVICE,
    active_profile,
    fallback_log,
    reset_fallback_log,
)
from .faults import set_profile as _set_python_profile
from op_db.sim_profile import COLLECTIVES, FAULT_KINDS, CollectiveFault, Fault, SimProfile, load_profile

__all__ = [
    "DEVICE",
    "COLLECTIVES",
    "CollectiveFault",
    "ENV_PROFILE",
    "FAULT_KINDS",
    "Fault",
    "SimProfile",
    "active_profile",
    "fallback_log",
    "is_registered",
    "load_profile",
    "register",
    "reset_fallback_log",
    "set_profile",
]

ENV_PROFILE = "NEURON_CHECK_SIM_PROFILE"

_registered = False


def set_profile(profile: SimProfile | None) -> None:
    """Make `profile` the active one (None: fault-free): the Python fault table, and in the native
    backend the refused dtypes, device count, event timing and ops routed through the fallback."""
    _set_python_profile(profile)
    from . import native

    if native.is_loaded():
        _apply_native(profile)


def _apply_native(profile: SimProfile | None) -> None:
    """The parts of `profile` the C++ runtime enforces, and the native ops it names routed
    through the fallback while it is active."""
    from . import fallback, native

    native.apply_profile(profile)
    fallback.route_profile_ops(profile)


def is_registered() -> bool:
    return _registered


def register() -> None:
    """Make ``device="sim"`` usable in this process. Safe to call more than once.

    Raises RuntimeError if PrivateUse1 is already taken by another backend name.
    """
    global _registered
    if _registered:
        return
    import torch

    from . import autocast, c10d, device_module, fallback, flex, native

    native.module()  # builds the C++ runtime on first use; loading it registers the device

    current = torch._C._get_privateuse1_backend_name()
    if current != DEVICE:
        if current != "privateuseone":
            raise RuntimeError(
                f"Cannot register the {DEVICE} device: PrivateUse1 is already registered as "
                f"{current!r} in this process."
            )
        torch.utils.rename_privateuse1_backend(DEVICE)
    if not hasattr(torch, DEVICE):
        torch._register_device_module(DEVICE, device_module.make_module())
    if not hasattr(torch.Tensor, DEVICE):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )
    fallback.install()
    autocast.install()
    flex.install()  # flex attention for PrivateUse1: PyTorch offers no registration for it
    c10d.register()  # as a real backend registers its process-group backend when imported
    env = os.environ.get(ENV_PROFILE)
    if env:
        set_profile(load_profile(env))
    else:
        _apply_native(active_profile())
    _registered = True
