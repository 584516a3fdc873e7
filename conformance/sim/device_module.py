"""`torch.sim`: the device module of the sim backend, as `torch.cuda` is CUDA's.

Devices, streams, events, generators and memory statistics live in the C++ runtime
(csrc/runtime.cpp) and reach Python through torch's device-generic API (`torch.Stream`,
`torch.Event`, `torch.accelerator`); this module offers them under the names CUDA code
uses. `torch.manual_seed` reaches the sim generators through `manual_seed_all`, as it does
for every registered PrivateUse1 backend.
"""

from __future__ import annotations

import contextlib
import types

import torch

from .faults import DEVICE
from .native import module as native


def _index(device=None) -> int:
    if device is None:
        return native().current_device()
    if isinstance(device, int):
        idx = device
    else:
        device = torch.device(device)
        if device.type != DEVICE:
            raise ValueError(f"Expected a {DEVICE} device, but got: {device}")
        idx = native().current_device() if device.index is None else device.index
    if idx == -1:
        return native().current_device()
    if not 0 <= idx < device_count():
        raise RuntimeError(f"Invalid device index {idx}: the {DEVICE} backend has {device_count()} device(s)")
    return idx


def generator(device=None) -> torch.Generator:
    """The default generator of a sim device."""
    return native().default_generator(_index(device))


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return native().device_count()


def current_device() -> int:
    return native().current_device()


def set_device(device) -> None:
    native().set_current_device(_index(device))


class device:  # noqa: N801 - torch.cuda.device's name
    """Context manager that makes `device` current (serialization moves storages under it)."""

    def __init__(self, device_) -> None:
        self.index = -1 if device_ is None else _index(device_)

    def __enter__(self) -> None:
        self.previous = current_device()
        if self.index >= 0:
            set_device(self.index)

    def __exit__(self, *exc) -> None:
        set_device(self.previous)


def synchronize(device=None) -> None:
    torch.accelerator.synchronize(_index(device))


def get_device_name(device=None) -> str:
    _index(device)
    return "sim (CPU-backed simulated accelerator)"


def get_device_capability(device=None) -> dict:
    _index(device)
    return {}


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float16, torch.bfloat16]


def manual_seed(seed: int) -> None:
    generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        generator(i).manual_seed(int(seed))


def seed() -> None:
    generator().seed()


def seed_all() -> None:
    for i in range(device_count()):
        generator(i).seed()


def initial_seed() -> int:
    return generator().initial_seed()


def get_rng_state(device=None) -> torch.Tensor:
    return generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device=None) -> None:
    generator(device).set_state(new_state.to("cpu", torch.uint8))


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def empty_cache() -> None:
    torch.accelerator.empty_cache()


def memory_allocated(device=None) -> int:
    return torch.accelerator.memory_allocated(_index(device))


def max_memory_allocated(device=None) -> int:
    return torch.accelerator.max_memory_allocated(_index(device))


def memory_reserved(device=None) -> int:
    return torch.accelerator.memory_reserved(_index(device))


def max_memory_reserved(device=None) -> int:
    return torch.accelerator.max_memory_reserved(_index(device))


def memory_stats(device=None) -> dict:
    return torch.accelerator.memory_stats(_index(device))


def reset_peak_memory_stats(device=None) -> None:
    torch.accelerator.reset_peak_memory_stats(_index(device))


def Stream(device=None, priority: int = 0, **_kwargs) -> torch.Stream:  # noqa: N802 - torch.cuda's name
    return torch.Stream(torch.device(DEVICE, _index(device)), priority=priority)


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:  # noqa: N802
    return torch.Event(DEVICE, enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def current_stream(device=None) -> torch.Stream:
    return torch.accelerator.current_stream(_index(device))


def default_stream(device=None) -> torch.Stream:
    idx = _index(device)
    return torch.Stream(stream_id=0, device_index=idx, device_type=int(torch._C._autograd.DeviceType.PrivateUse1))


def set_stream(stream_: torch.Stream) -> None:
    torch.accelerator.set_stream(stream_)


@contextlib.contextmanager
def stream(stream_: torch.Stream | None):
    if stream_ is None:
        yield
        return
    previous = torch.accelerator.current_stream(stream_.device_index)
    set_stream(stream_)
    try:
        yield
    finally:
        set_stream(previous)


_EXPORTS = (
    is_available, is_initialized, _is_in_bad_fork, device_count, current_device, set_device, device,
    synchronize, get_device_name, get_device_capability, get_amp_supported_dtype, manual_seed,
    manual_seed_all, seed, seed_all, initial_seed, get_rng_state, set_rng_state,
    get_rng_state_all, set_rng_state_all, empty_cache, memory_allocated, max_memory_allocated,
    memory_reserved, max_memory_reserved, memory_stats, reset_peak_memory_stats, Stream, Event,
    current_stream, default_stream, set_stream, stream,
)


def make_module() -> types.ModuleType:
    """The module object registered as `torch.sim`."""
    mod = types.ModuleType(f"torch.{DEVICE}", "The sim device (CPU-backed PrivateUse1).")
    for fn in _EXPORTS:
        setattr(mod, fn.__name__, fn)
    return mod
