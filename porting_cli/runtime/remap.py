"""Run a CUDA script on another device: remap `cuda` to the target, logging each call site.

Used by the porting trace in its child process (porting_cli/runtime/trace_child.py). What is remapped,
and how, so the behaviour is predictable:

* device arguments of every torch call (a TorchFunctionMode): the keyword `device=` of
  factories and `.new_*`, and positional `"cuda"` / `"cuda:N"` strings or `torch.device("cuda")`
  objects (as in `.to("cuda")`); every CUDA index collapses onto the one target device;
* `Tensor.cuda()` and `nn.Module.cuda()` become `.to(target)`;
* `torch.cuda` functions a script uses to find and drive its GPU (`is_available`,
  `device_count`, `current_device`, `set_device`, `synchronize`, `manual_seed(_all)`,
  `empty_cache`, `memory_*`, `is_bf16_supported`, `get_device_name`) answer for the target;
* `torch.cuda.amp.autocast`, `torch.autocast("cuda")`, `torch.cuda.amp.GradScaler` and
  `torch.amp.GradScaler("cuda")` use the target's device type; if the target cannot run
  autocast at all, autocast is disabled and the log says so;
* `torch.cuda.Event`, `torch.cuda.Stream`, `torch.cuda.current_stream` / `default_stream` and
  `torch.cuda.stream(...)` use the target's device-generic events and streams (remap_streams.py).

Not remapped (the static scan reports them): `torch.device("cuda")` objects compared with
`tensor.device`, `tensor.is_cuda`, CUDA graphs, `torch.Generator("cuda")`,
NCCL process groups, device capabilities. Each remap is logged once per (call site, what) with a
count; calls made from library code rather than the user's files are logged with no site.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from porting_cli.runtime.frames import UserFrames
from porting_cli.runtime.remap_libs import library_patches
from porting_cli.runtime.remap_log import RemapLog, describe_device, is_cuda_device
from porting_cli.runtime.remap_streams import stream_patches

AUTOCAST_ARGS = ("dtype", "enabled", "cache_enabled")  # torch.amp.autocast's after device_type


class DeviceRemapMode(TorchFunctionMode):
    """Rewrites CUDA device arguments of torch calls to the target device.

    When the target has no pinned host memory, `pin_memory=True` and `Tensor.pin_memory()` are
    dropped (the tensor stays in pageable memory), so the script runs and the log says so.
    """

    def __init__(self, target: str, log: RemapLog, pinning: bool = True):
        super().__init__()
        self.target = target
        self.log = log
        self.pinning = pinning
        self.device_type = torch.device(target).type

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", str(func))
        name = "Module.to" if name == "_parse_to" else name  # nn.Module.to parses its device here
        if func is torch.Tensor.cuda:
            self.log(f"Tensor.cuda() -> .to({self.target!r})")
            return args[0].to(self.target, non_blocking=bool(kwargs.get("non_blocking", False)))
        if not self.pinning:
            if func is torch.Tensor.pin_memory:
                self.log(f"Tensor.pin_memory() -> unpinned ({self.device_type} has no pinned memory)")
                return args[0]
            if func is torch.Tensor.is_pinned:
                return False
            if kwargs.get("pin_memory"):
                self.log(f"{name}(pin_memory=True) -> pin_memory=False ({self.device_type} has no pinned memory)")
                kwargs["pin_memory"] = False
        changed = []
        args = self._index_to_target(func, name, args)
        if _is_index(kwargs.get("device")):
            kwargs["device"] = f"cuda:{kwargs['device']}"  # a bare index names a CUDA device here
        if is_cuda_device(kwargs.get("device")):
            changed.append(describe_device(kwargs["device"]))
            kwargs["device"] = self.target
        if any(is_cuda_device(a) for a in args):
            changed += [describe_device(a) for a in args if is_cuda_device(a)]
            if func is torch.device and len(args) > 1:  # torch.device("cuda", rank): the index collapses too
                changed[0], args = ", ".join(map(repr, args)), args[:1]
            args = tuple(self.target if is_cuda_device(a) else a for a in args)
        if changed and func is torch.device:
            self.log(f"torch.device({changed[0]}) -> {self.target!r}")
        elif changed:
            self.log(f"{name}(device={changed[0]}) -> {self.target!r}")
        return func(*args, **kwargs)

    def _index_to_target(self, func, name: str, args: tuple) -> tuple:
        """`.to(rank)` in a CUDA script names CUDA device `rank`: it collapses onto the target."""
        position = 1 if func is torch.Tensor.to else 0 if name == "Module.to" else None
        if position is None or len(args) <= position or not _is_index(args[position]):
            return args
        return (*args[:position], f"cuda:{args[position]}", *args[position + 1:])


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _target_call(module: Any, name: str, default: Callable[..., Any]) -> Callable[..., Any]:
    found = getattr(module, name, None) if module is not None else None
    return found if callable(found) else default


def _autocast_usable(device_type: str) -> bool:
    """Whether autocast runs a matmul on the target (a backend may lack autocast kernels)."""
    try:
        x = torch.ones(2, 2, device=device_type)
        with torch.autocast(device_type, dtype=torch.bfloat16):
            torch.mm(x, x)
        return True
    except Exception:
        return False


def _pinning_usable() -> bool:
    """Whether the target has pinned host memory (a PrivateUse1 backend may not register it)."""
    try:
        torch.empty(1).pin_memory()
        return True
    except Exception:
        return False


def _noting_start(frames: UserFrames, start: Callable[..., Any]) -> Callable[..., Any]:
    """Thread.start that notes the user line starting the thread (its ops' site when it has
    none of its own) and carries the starter's torch modes (remap, op recorder) into it:
    torch keeps mode stacks per thread."""
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    def noting_start(self: threading.Thread) -> None:
        frames.note_thread_start(self)
        modes = [*_get_current_function_mode_stack(), *_get_current_dispatch_mode_stack()]
        run = self.run

        def run_with_modes() -> None:
            with contextlib.ExitStack() as stack:
                for mode in modes:
                    stack.enter_context(mode)
                run()

        if modes:
            self.run = run_with_modes  # type: ignore[method-assign]
        start(self)

    return noting_start


def _true_unless_torch_asks(real: Callable[[], bool]) -> Callable[[], bool]:
    """torch.cuda.is_available() for the remap: True for the script and its libraries, the truth
    for torch's own internals, which follow a True with CUDA-only calls (Dynamo saves the CUDA RNG
    state around every frame it compiles: `torch.cuda.get_rng_state()` on a CPU build raises)."""
    import sys

    def is_available() -> bool:
        caller = sys._getframe(2).f_globals.get("__name__", "")  # 1 is the logging wrapper (answer)
        return real() if caller == "torch" or caller.startswith("torch.") else True

    return is_available


@contextlib.contextmanager
def remap_cuda(target: str, log: RemapLog, adapter: Any) -> Iterator[list[str]]:
    """Inside the block, CUDA calls run on `target`; yields a list of notes (e.g. autocast off)."""
    device_type = torch.device(target).type
    index = torch.device(target).index or 0
    module = getattr(torch, device_type, None)
    notes: list[str] = []
    autocast_ok = _autocast_usable(device_type)
    base_autocast, base_scaler = torch.amp.autocast, torch.amp.GradScaler

    class RemappedAutocast(base_autocast):  # type: ignore[misc, valid-type]
        """torch.autocast with every calling form: positional or keyword device_type, dtype,
        enabled and cache_enabled (also through functools.partial)."""

        def __init__(self, *args: Any, **kwargs: Any):
            args_list = list(args)
            given = kwargs.pop("device_type") if "device_type" in kwargs else (args_list.pop(0) if args_list else "cuda")
            kwargs.update(zip(AUTOCAST_ARGS, args_list))
            if given == "cuda":
                log(f"autocast('cuda') -> autocast({device_type!r})")
                given = device_type
            if given == device_type and not autocast_ok:
                kwargs["enabled"] = False
                note = f"autocast is not usable on {device_type!r}; autocast regions ran without it"
                if note not in notes:
                    notes.append(note)
            super().__init__(given, **kwargs)

    class RemappedGradScaler(base_scaler):  # type: ignore[misc, valid-type]
        def __init__(self, device: str = "cuda", *args: Any, **kwargs: Any):
            if device == "cuda":
                log(f"GradScaler('cuda') -> GradScaler({device_type!r})")
                device = device_type
            super().__init__(device, *args, **kwargs)

    def cuda_autocast(enabled: bool = True, dtype: torch.dtype = torch.float16, cache_enabled: bool = True):
        log(f"torch.cuda.amp.autocast -> torch.amp.autocast({device_type!r})")
        return RemappedAutocast(device_type, dtype=dtype, enabled=bool(enabled), cache_enabled=cache_enabled)

    def cuda_grad_scaler(*args: Any, **kwargs: Any):
        log(f"torch.cuda.amp.GradScaler -> torch.amp.GradScaler({device_type!r})")
        return base_scaler(device_type, *args, **kwargs)

    def answer(what: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def patched(*args: Any, **kwargs: Any) -> Any:
            log(f"torch.cuda.{what} -> {device_type}", direct_only=True)
            return fn(*args, **kwargs)

        return patched

    def module_cuda(self, device: Any = None):
        log(f"Module.cuda() -> .to({target!r})")
        return self.to(target)

    def set_default_device(device: Any) -> None:
        if is_cuda_device(device):
            log(f"torch.set_default_device({describe_device(device)}) -> {target!r}")
            device = target
        original_default(device)

    def seed_default_generator(seed: int) -> None:
        torch.default_generator.manual_seed(int(seed))

    memory = _target_call(module, "memory_allocated", lambda *a, **k: 0)
    cuda_functions: dict[str, Callable[..., Any]] = {
        "is_available": _true_unless_torch_asks(torch.cuda.is_available),
        "device_count": lambda: max(1, adapter.device_count()),
        "current_device": lambda: index,
        "set_device": lambda device: None,
        "synchronize": lambda device=None: adapter.synchronize(),
        # Not torch.manual_seed as the default: it calls torch.cuda.manual_seed_all itself.
        "manual_seed": _target_call(module, "manual_seed", seed_default_generator),
        "manual_seed_all": _target_call(module, "manual_seed_all", seed_default_generator),
        "empty_cache": lambda: adapter.empty_cache(),
        "memory_allocated": memory,
        "max_memory_allocated": _target_call(module, "max_memory_allocated", memory),
        "memory_reserved": _target_call(module, "memory_reserved", memory),
        "max_memory_reserved": _target_call(module, "max_memory_reserved", memory),
        "reset_peak_memory_stats": _target_call(module, "reset_peak_memory_stats", lambda *a, **k: None),
        "memory_stats": _target_call(module, "memory_stats", lambda *a, **k: {}),
        "memory_summary": lambda *a, **k: "",
        "is_bf16_supported": lambda *a, **k: adapter.dtype_supported("bfloat16"),
        "get_device_name": lambda *a, **k: f"{target} (remapped from cuda by neuron-check)",
    }
    patches: list[tuple[Any, str, Any]] = [
        (torch.cuda, name, answer(f"{name}()", fn)) for name, fn in cuda_functions.items()
    ]
    original_default = torch.set_default_device
    patches += [
        (torch.cuda.amp, "autocast", cuda_autocast),
        (torch.cuda.amp, "GradScaler", cuda_grad_scaler),
        (torch, "autocast", RemappedAutocast),
        (torch.amp, "autocast", RemappedAutocast),
        (torch.amp, "GradScaler", RemappedGradScaler),
        (torch.nn.Module, "cuda", module_cuda),
        (torch, "set_default_device", set_default_device),
        (threading.Thread, "start", _noting_start(log.frames, threading.Thread.start)),
    ]
    patches += stream_patches(device_type, log)
    pinning = _pinning_usable()
    patches += library_patches(target, log, pinning)
    saved = [(owner, name, owner.__dict__.get(name, getattr(owner, name))) for owner, name, _ in patches]
    for owner, name, value in patches:
        setattr(owner, name, value)
    try:
        with DeviceRemapMode(target, log, pinning):
            yield notes
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)
