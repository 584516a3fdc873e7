"""Judge every primitive of a device's op sequence on its own (DESIGN.md, rule 6).

A device that ran an op through a decomposition passes by the error of that decomposition
(conformance/reference/replay.py) only if each primitive of it is right: the error a composite may
carry is that of correct primitives, never of a faulty one. The recorder kept, for every
aten call of one device run, CPU snapshots of its inputs and outputs
(`OpRecorder(keep_calls="snapshots")`); here each call runs again on the CPU on the device's
own inputs, in the same dtype and in float64, and the device's output is judged by the same
numerics rule as any op (conformance/numerics/), the calls of one overload pooled for the
bias rule (rule 5), so that a small lean shows over all of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.reference.accelerator_kernels import run_on_cpu
from conformance.numerics import Comparison, compare
from conformance.numerics.ulp import merge_numerics
from conformance.reference.oprecord import RecordedCall, op_name

# Calls whose output values are undefined (uninitialised memory): nothing to judge.
_UNDEFINED = re.compile(r"^aten\.(empty\w*|new_empty\w*|resize\w*)\.")
_WIDE = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.float32: torch.float64,
         torch.complex32: torch.complex128, torch.complex64: torch.complex128}


def judge_primitives(calls: Iterable[RecordedCall], device_type: str) -> Comparison:
    """Worst-of the device's calls, each against the CPU on the same inputs (ok when every
    call, and every overload's pooled statistics, pass); `reason` names the failing call."""
    pooled: dict[str, Comparison] = {}
    for call in calls:
        verdict = judge_call(call, device_type)
        if verdict is None:
            continue
        name = op_name(call.func)
        if not verdict.ok:
            verdict.reason = f"primitive {name} of the device's op sequence fails on its own: {verdict.reason}"
            verdict.where = name
            return verdict
        pooled[name] = verdict if name not in pooled else _pool(pooled[name], verdict)
    for name, verdict in pooled.items():
        reason = verdict.numerics.verdict() if verdict.numerics is not None else None
        if reason:
            return Comparison(False, "bias", f"primitive {name} of the device's op sequence, over all its calls: {reason}",
                              where=name, numerics=verdict.numerics)
    return Comparison(True, "exact")


def _pool(a: Comparison, b: Comparison) -> Comparison:
    merged = a.merge(b)
    merged.numerics = merge_numerics(a.numerics, b.numerics)
    return merged


def judge_call(call: RecordedCall, device_type: str) -> Comparison | None:
    """One call judged alone, or None where there is nothing to judge (no floating output,
    a random op, a call the CPU cannot run)."""
    if not _floating(call.out) or torch.Tag.nondeterministic_seeded in getattr(call.func, "tags", ()) \
            or _UNDEFINED.match(op_name(call.func)):
        return None
    try:
        ref = _run(call, device_type, wide=False)
    except Exception:
        return None
    try:
        hi = _run(call, device_type, wide=True)
    except Exception:
        hi = None
    return compare(call.out, ref, hi)


def _run(call: RecordedCall, device_type: str, wide: bool) -> Any:
    def argument(value: Any) -> Any:
        if isinstance(value, torch.device) and value.type == device_type:
            return torch.device("cpu")
        if isinstance(value, torch.Tensor):
            value = value.clone()  # the snapshot serves both runs: in-place calls must not spend it
            return value.to(_WIDE[value.dtype]) if wide and value.dtype in _WIDE else value
        if wide and isinstance(value, torch.dtype):
            return _WIDE.get(value, value)
        return value

    args, kwargs = pytree.tree_map(argument, (call.args, call.kwargs))
    with torch.no_grad():
        return run_on_cpu(call.func, args, kwargs)


def _floating(out: Any) -> bool:
    return any(isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())
               for t in pytree.tree_leaves(out))
