"""What the active sim profile does to one op call: raise, fall back, or corrupt outputs.

Runtime state lives here: the active `SimProfile`, the CPU-fallback log, and whether the op
runs inside a compiled graph (where `compile_faults` apply too).
"""

from __future__ import annotations

import os
import signal
import time
import warnings
from collections import Counter
from contextlib import contextmanager
from typing import Iterable, Iterator

import torch

from op_db.sim_profile import SimProfile

DEVICE = "sim"

_active: SimProfile | None = None
_fallback_log: Counter[str] = Counter()
_graph_depth = 0  # > 0 while the sim compile backend runs a graph's nodes


def set_profile(profile: SimProfile | None) -> None:
    global _active
    if profile is not None and not isinstance(profile, SimProfile):
        raise TypeError(f"set_profile expects a SimProfile or None, got {type(profile).__name__}")
    _active = profile


def active_profile() -> SimProfile | None:
    return _active


@contextmanager
def in_compiled_graph() -> Iterator[None]:
    """Ops called inside are a compiled graph's: `compile_faults` apply to them as well."""
    global _graph_depth
    _graph_depth += 1
    try:
        yield
    finally:
        _graph_depth -= 1


def has_faults(profile: SimProfile) -> bool:
    return bool(profile.faults or (_graph_depth and profile.compile_faults))


def fallback_log() -> Counter[str]:
    """Ops (``str(OpOverload)``) that ran through the CPU fallback since the last reset."""
    return Counter(_fallback_log)


def reset_fallback_log() -> None:
    _fallback_log.clear()


def c10_op_name(func: torch._ops.OpOverload) -> str:
    """The operator name as c10 prints it: ``aten::mul.Tensor``, ``aten::median``."""
    schema = func._schema
    return f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name


def _available_backends(func: torch._ops.OpOverload) -> str:
    keys = ["CPU", "CUDA", "Meta", "BackendSelect", "Python", "Autograd"]
    name = c10_op_name(func)
    have = [k for k in keys if torch._C._dispatch_has_kernel_for_dispatch_key(name, k)]
    return "[" + ", ".join(have) + "]"


def not_implemented(func: torch._ops.OpOverload, backend: str = DEVICE) -> NotImplementedError:
    """The error c10's dispatcher raises for an operator with no kernel for the backend."""
    name = c10_op_name(func)
    return NotImplementedError(
        f"Could not run '{name}' with arguments from the '{backend}' backend. This could be "
        "because the operator doesn't exist for this backend, or was omitted during the "
        "selective/custom build process (if using custom build). If you are a Facebook "
        "employee using PyTorch on mobile, please visit https://fburl.com/ptmfixes for "
        f"possible resolutions. '{name}' is only available for these backends: "
        f"{_available_backends(func)}."
    )


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_not_supported(dtype: torch.dtype) -> RuntimeError:
    name = dtype_name(dtype)
    # RuntimeError, not TypeError: Tensor operators turn a TypeError into NotImplemented,
    # which would hide this message behind "unsupported operand type(s)".
    return RuntimeError(
        f"Cannot convert a {DEVICE} Tensor to {name} dtype as the {DEVICE} device doesn't "
        f"support {name}: dtype {name} is not supported on the {DEVICE} backend."
    )


def check_dtypes(profile: SimProfile, dtypes: Iterable[torch.dtype]) -> None:
    if not profile.unsupported_dtypes:
        return
    for dt in dtypes:
        if dtype_name(dt) in profile.unsupported_dtypes:
            raise dtype_not_supported(dt)


def before(profile: SimProfile, func: torch._ops.OpOverload, name: str) -> None:
    """Checks made before an op runs: unsupported op, CPU fallback announcement."""
    if profile.is_unsupported_op(name):
        raise not_implemented(func)
    if profile.is_fallback_op(name):
        _fallback_log[name] += 1
        warnings.warn(
            f"The operator '{c10_op_name(func)}' is not currently supported on the {DEVICE} "
            "device and will fall back to run on the CPU. This may have performance "
            "implications.",
            UserWarning,
            stacklevel=3,
        )


def after(profile: SimProfile, name: str, dtypes: set[str], outputs: list[torch.Tensor],
          views: list[bool]) -> list[torch.Tensor]:
    """Apply matching faults to the op's CPU outputs; returns the (possibly new) outputs.

    `views[i]` says output i aliases an input without writing it (a view): such an output is
    replaced by a corrupted copy so the input is left alone.
    """
    matching = profile.faults_for(name)
    if _graph_depth:
        matching += profile.compile_faults_for(name)
    for fault in matching:
        if fault.dtype is not None and fault.dtype not in dtypes:
            continue
        if fault.kind == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
            time.sleep(5)  # the signal is delivered asynchronously on some platforms
        elif fault.kind == "hang":
            while True:
                time.sleep(3600)
        elif fault.kind == "raise":
            raise RuntimeError(fault.value)
        else:
            outputs = [_corrupt(t, fault, v) for t, v in zip(outputs, views)]
    return outputs


def _corrupt(t: torch.Tensor, fault, is_view: bool) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or not (t.is_floating_point() or t.is_complex()):
        return t
    with torch.no_grad():
        # Compute in double precision, then cast: works for every floating dtype (FP8 too).
        hi = t.to(torch.complex128 if t.is_complex() else torch.float64)
        if fault.kind == "scale":
            hi = hi * fault.value
        elif fault.kind == "offset":
            hi = hi + fault.value
        else:
            hi = torch.full_like(hi, float("nan"))
        bad = hi.to(t.dtype)
        if is_view:
            return bad
        return t.copy_(bad)
