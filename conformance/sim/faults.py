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

from conformance.numerics import ulp
from op_db.sim_profile import ROUNDING_KINDS, Fault, SimProfile

DEVICE = "sim"
# Faults that need the op's result one precision up (see `widened_inputs`).
RECOMPUTE_KINDS = ROUNDING_KINDS | {"scale"}
# Recompute precision: narrow floats in float32 (as a device computes them), float32 in float64.
_WIDER = {torch.bfloat16: torch.float32, torch.float16: torch.float32, torch.float32: torch.float64,
          **{d: torch.float32 for d in ulp.DOUBLE_ROUNDING_VIA if d.itemsize == 1}}

_active: SimProfile | None = None
_fallback_log: Counter[str] = Counter()
_graph_depth = 0  # > 0 while the sim compile backend runs a graph's nodes
_draws: dict[Fault, torch.Generator] = {}  # seeded per stochastic fault, reset with the profile


def set_profile(profile: SimProfile | None) -> None:
    global _active
    if profile is not None and not isinstance(profile, SimProfile):
        raise TypeError(f"set_profile expects a SimProfile or None, got {type(profile).__name__}")
    _active = profile
    _draws.clear()


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


def matching_faults(profile: SimProfile, name: str) -> tuple:
    """The faults for op `name` here: `faults`, plus `compile_faults` inside a compiled graph."""
    found = profile.faults_for(name)
    return found + profile.compile_faults_for(name) if _graph_depth else found


def wants_recompute(profile: SimProfile, name: str) -> bool:
    return any(f.kind in RECOMPUTE_KINDS for f in matching_faults(profile, name))


def widened(value):
    """A copy of one op argument one precision up (float tensors and dtype arguments)."""
    if isinstance(value, torch.Tensor) and value.dtype in _WIDER:
        return value.detach().to(_WIDER[value.dtype], copy=True)
    if isinstance(value, torch.dtype):
        return _WIDER.get(value, value)
    return value


def after(profile: SimProfile, name: str, dtypes: set[str], outputs: list[torch.Tensor],
          views: list[bool], recompute=None) -> list[torch.Tensor]:
    """Apply matching faults to the op's CPU outputs; returns the (possibly new) outputs.

    `views[i]` says output i aliases an input without writing it (a view): such an output is
    replaced by a corrupted copy so the input is left alone. `recompute()` runs the op on
    widened inputs (`widened`): rounding faults and `scale` round its result into each
    output's dtype, so they act below the output's own rounding step (a 0.2% `scale` is
    visible in bfloat16); without it `scale` multiplies the rounded output.
    """
    wide = None
    for fault in matching_faults(profile, name):
        if fault.dtype is not None and fault.dtype not in dtypes:
            continue
        if fault.kind in TRIP_KINDS:
            trip(fault)
            continue
        if fault.kind in RECOMPUTE_KINDS and wide is None and recompute is not None:
            wide = _recomputed(recompute, len(outputs))
        exact = wide if wide is not None else [None] * len(outputs)
        outputs = [_corrupt(t, fault, v, w) for t, v, w in zip(outputs, views, exact)]
    return outputs


TRIP_KINDS = frozenset({"crash", "hang", "raise", "delay"})


def trip(fault) -> None:
    """Crash the process, hang it, raise, or sleep `value` seconds: the faults that stop or slow
    an op instead of corrupting it (a delayed op then gives its right result)."""
    if fault.kind == "delay":
        time.sleep(fault.value)
    elif fault.kind == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(5)  # the signal is delivered asynchronously on some platforms
    elif fault.kind == "hang":
        while True:
            time.sleep(3600)
    elif fault.kind == "raise":
        raise RuntimeError(fault.value)


def corrupt_in_place(t: torch.Tensor, fault) -> None:
    """Apply a value fault to `t` itself (a collective's output buffer)."""
    if t.numel() and fault.kind not in TRIP_KINDS:
        _corrupt(t, fault, is_view=False)


def _recomputed(recompute, count: int) -> list[torch.Tensor | None] | None:
    try:
        out = recompute()
    except Exception:  # the op has no kernel for the wider dtype: the faults act on its outputs
        return None
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return outs if len(outs) == count else None


def _round_into(fault: Fault, exact: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The fault's rounding of exact values (float64) into `dtype`."""
    if fault.kind == "scale":
        return ulp.round_nearest_even(exact * fault.value, dtype)
    if fault.kind == "truncate":
        return ulp.round_toward_zero(exact, dtype)
    if fault.kind == "double_round":
        return ulp.round_double(exact, dtype)
    draws = _draws.get(fault)
    if draws is None:
        draws = _draws[fault] = torch.Generator().manual_seed(int(fault.value or 0))
    return ulp.round_stochastic(exact, dtype, draws)


def _corrupt(t: torch.Tensor, fault, is_view: bool, wide: torch.Tensor | None = None) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        return t
    if not (t.is_floating_point() or t.is_complex()):
        return _corrupt_integer(t, fault, is_view)
    with torch.no_grad():
        if fault.kind in ROUNDING_KINDS and t.dtype not in _WIDER:
            return t  # float64, complex: no rounding step to corrupt
        if fault.kind in RECOMPUTE_KINDS and t.dtype in _WIDER:
            usable = isinstance(wide, torch.Tensor) and wide.is_floating_point() and wide.shape == t.shape
            if not usable:
                if fault.kind != "scale":
                    return t  # nothing wider to round from: the output is already rounded
                wide = t
            bad = _round_into(fault, wide.to(torch.float64), t.dtype).to(t.dtype)
            return bad if is_view else t.copy_(bad)
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


def _corrupt_integer(t: torch.Tensor, fault, is_view: bool) -> torch.Tensor:
    """`scale`/`offset` on an integer output, only where the fault names that output's dtype: an
    integer kernel (the int32 accumulator of an int8 matmul) can be wrong too, but a fault meant
    for floats must not touch the indices and shapes every op computes in int64. The result is
    rounded to the nearest integer and saturated to the dtype's range."""
    if fault.kind not in ("scale", "offset") or t.dtype is torch.bool or fault.dtype != dtype_name(t.dtype):
        return t
    with torch.no_grad():
        hi = t.to(torch.float64)
        hi = hi * fault.value if fault.kind == "scale" else hi + fault.value
        info = torch.iinfo(t.dtype)
        bad = hi.round().clamp(info.min, info.max).to(t.dtype)
        return bad if is_view else t.copy_(bad)
