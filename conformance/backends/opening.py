"""Opening the device a command names: the adapter, initialised, and the device string, with a
sim profile validated and exported first so worker processes inherit it. The command line and the
porting runtime's child processes both open their device here."""

from __future__ import annotations

import os

from conformance import backends
from op_db.errors import InputError


def apply_sim_profile(path: str | None) -> str | None:
    """Validate a sim profile and export it so worker processes inherit it."""
    path = path or os.environ.get("NEURON_CHECK_SIM_PROFILE") or None
    if path is None:
        return None
    import conformance.sim as sim

    sim.load_profile(path)  # raises InputError naming the bad entry
    path = os.path.abspath(path)
    os.environ["NEURON_CHECK_SIM_PROFILE"] = path
    return path


def resolve_device(device: str | None, sim_profile: str | None = None):
    """Adapter (initialised) and device string for --device; InputError when unusable."""
    profile = apply_sim_profile(sim_profile)
    adapter, device_string = backends.resolve(device)
    if profile is not None and adapter.name != "sim":
        raise InputError("--sim-profile applies only to --device sim.")
    adapter.init()
    _, index = backends.split_device(device_string)
    count = adapter.device_count()
    if index is not None and count and not 0 <= index < count:
        raise InputError(f"device {device_string!r} does not exist: {adapter.name} has {count} device(s), "
                         f"index 0 to {count - 1}.")
    return adapter, device_string
