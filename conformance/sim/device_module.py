"""`torch.sim`: the device module of the sim backend, plus its PrivateUse1 hooks and guard.

The sim device owns one random generator (a CPU generator object, so a seeded sim stream
reproduces the CPU stream for the same seed). `torch.manual_seed` reaches it through
`manual_seed_all`, as it does for every registered PrivateUse1 backend.
"""

from __future__ import annotations

import contextlib
import types

import torch

from .dynamo_skip import skip_recursively
from .faults import DEVICE

_generator: torch.Generator | None = None


def generator() -> torch.Generator:
    global _generator
    if _generator is None:
        _generator = torch.Generator()
        _generator.manual_seed(torch.initial_seed())
    return _generator


def _index(device=None) -> int:
    if device is None:
        return 0
    if isinstance(device, int):
        idx = device
    else:
        device = torch.device(device)
        if device.type != DEVICE:
            raise ValueError(f"Expected a {DEVICE} device, but got: {device}")
        idx = 0 if device.index is None else device.index
    if idx not in (0, -1):
        raise RuntimeError(f"Invalid device index {idx}: the {DEVICE} backend has 1 device")
    return 0


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return 1


def current_device() -> int:
    return 0


def set_device(device) -> None:
    _index(device)


def synchronize(device=None) -> None:
    _index(device)


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
    manual_seed(seed)


def seed() -> None:
    generator().seed()


def seed_all() -> None:
    seed()


def initial_seed() -> int:
    return generator().initial_seed()


def get_rng_state(device=None) -> torch.Tensor:
    _index(device)
    return generator().get_state()


def set_rng_state(new_state: torch.Tensor, device=None) -> None:
    _index(device)
    generator().set_state(new_state.to("cpu", torch.uint8))


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state()]


def set_rng_state_all(new_states) -> None:
    set_rng_state(list(new_states)[0])


def empty_cache() -> None:
    pass


def memory_allocated(device=None) -> int:
    _index(device)
    return 0


def max_memory_allocated(device=None) -> int:
    _index(device)
    return 0


def memory_reserved(device=None) -> int:
    _index(device)
    return 0


def reset_peak_memory_stats(device=None) -> None:
    _index(device)


# Streams and events: sim computes synchronously on the CPU, so one in-order queue serves all;
# these are the device-generic torch.Stream/torch.Event objects that FSDP2 and DDP ask for.
def Stream(device=None, priority: int = 0, **_kwargs) -> torch.Stream:  # noqa: N802 - torch.cuda's name
    _index(device)
    return torch.Stream(DEVICE, priority=priority)


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:  # noqa: N802
    return torch.Event(DEVICE, enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def current_stream(device=None) -> torch.Stream:
    _index(device)
    return torch.accelerator.current_stream(torch.device(DEVICE, 0))


def set_stream(stream_: torch.Stream) -> None:
    torch.accelerator.set_stream(stream_)


@contextlib.contextmanager
def stream(stream_: torch.Stream | None):
    if stream_ is None:
        yield
        return
    previous = current_stream()
    set_stream(stream_)
    try:
        yield
    finally:
        set_stream(previous)


_EXPORTS = (
    is_available, is_initialized, _is_in_bad_fork, device_count, current_device, set_device,
    synchronize, get_device_name, get_device_capability, get_amp_supported_dtype, manual_seed,
    manual_seed_all, seed, seed_all, initial_seed, get_rng_state, set_rng_state,
    get_rng_state_all, set_rng_state_all, empty_cache, memory_allocated, max_memory_allocated,
    memory_reserved, reset_peak_memory_stats, Stream, Event, current_stream, set_stream, stream,
)


def make_module() -> types.ModuleType:
    """The module object registered as `torch.sim`."""
    mod = types.ModuleType(f"torch.{DEVICE}", "The sim device (CPU-backed PrivateUse1).")
    for fn in _EXPORTS:
        setattr(mod, fn.__name__, fn)
    return mod


class _Hooks(torch._C._acc.PrivateUse1Hooks):
    def is_available(self) -> bool:
        return True

    def has_primary_context(self, dev_id) -> bool:
        return True

    def is_built(self) -> bool:
        return True


class _Guard(torch._C._acc.DeviceGuard):
    def type_(self):
        return torch._C._autograd.DeviceType.PrivateUse1


_keep_alive: list = []


def register_hooks() -> None:
    """Register PrivateUse1 hooks and device guard (once per process; later calls no-op)."""
    hooks, guard = _Hooks(), _Guard()
    skip_recursively(*(getattr(cls, name) for cls in (_Hooks, _Guard) for name in vars(cls)
                       if callable(getattr(cls, name)) and not name.startswith("__")))
    if torch._C._acc.register_python_privateuseone_hook(hooks):
        _keep_alive.append(hooks)
    if torch._C._acc.register_python_privateuseone_device_guard(guard):
        _keep_alive.append(guard)
