"""The FP8 suite: conversions, FP8 arithmetic and FP8 data movement on the device vs CPU.

Work items are ("fp8", subject, variant, dtype, mode), dtype one of float8_e4m3fn,
float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz:

    subject    variants                                       judged
    cast       from_float32 from_bfloat16 from_float16        bit-exact (a NaN matches any NaN)
               to_float32 to_bfloat16 to_float16              bit-exact (all 256 codes decoded)
    scaled_mm  per_tensor rowwise                             error bound below
    movement   copy view cat index_select transpose           bit-exact, NaN payloads included
    opinfo     the OpInfo full name (eye, torch._scaled_mm,   FP8 outputs: bit-exact, or within
               torch._scaled_mm_v2 in torch 2.13)             1 FP8 step for scaled_mm; others:
                                                              the numerics rule

`cast from_*` converts, for the boundary grid and a dense grid (conformance/fp8_inputs.py):
every FP8 value, every midpoint between adjacent values (ties to even) and the
neighbours of each in the source dtype, subnormals of both formats, the largest
finite value and the overflow edge above it (e4m3fn has no infinity: whatever the
CPU does there, saturate or NaN, the device must do bit for bit), +-Inf, NaN, +-0;
then every bfloat16/float16 value, or 327,680 float32 values covering every
rounding bit. A mismatch names the first differing input and both bit patterns:
"input 0x43e00000 (448.0): device 0x7f (nan), CPU 0x7e (448.0)".

The `_scaled_mm` error bound. The output is out = fl_out(s_a s_b sum_k a_ik b_kj)
with FP8 a, b and float32 scales, out_dtype bfloat16. Products of two FP8 values
are exact in float32; a float32 accumulation of K terms in any order errs by at
most (K-1) u S, S = |s_a s_b| sum_k |a_ik||b_kj| (u = 2^-24); applying the two
scales adds at most 2 u relative; rounding to out_dtype adds u_out = eps(out)/2.
So against the float64 product of the dequantised inputs (itself exact to
~K 2^-53 S, negligible):

    |out - exact| <= u_out |exact| + (K + 2) u (1 + u_out) S + eps(out) tiny(out)

(the last term: one subnormal step). It holds for every summation order and
blocking, and for a kernel that rounds a float32 result to out_dtype once. A
kernel that accumulates in less than float32 (some "fast accumulation" modes)
fails it, as it should. `err_ratio` is rmse(device - exact) / rmse(CPU - exact);
`extra["bound_ratio"]` is the largest |out - exact| / bound (<= 1 passes).

UNSUPPORTED, not ERROR, when the backend lacks FP8: the adapter says the dtype is
unsupported, or a tiny conversion on the device raises what
conformance.outcome.classify_exception calls UNSUPPORTED. The fnuz formats are
tested only where the backend claims them; elsewhere their items are SKIP.
Autograd does not apply to FP8 data, so `plan(grad=True)` adds no items.

Every case first moves its inputs to the device and back; if that alone changes a
bit, the item fails with failing_op aten._to_copy.default ("transfer of input 0,
element 1"), so a broken transfer is not blamed on the op under test. OpInfo
samples that mix FP8 formats (e4m3fn x e5m2 _scaled_mm) are left out of both
formats' items, since a failure could not be put down to one format.
"""

from __future__ import annotations

import time
from typing import Any

from conformance.fp8.inputs import FP8_NAMES, PRIMARY_FP8, WIDE_NAMES, fp8_dtype
from op_db.errors import InputError
from op_db.records import Result, Status, WorkItem, shorten

SUITE = "fp8"
SUBJECTS: dict[str, tuple[str, ...]] = {
    "cast": tuple(f"from_{w}" for w in WIDE_NAMES) + tuple(f"to_{w}" for w in WIDE_NAMES),
    "scaled_mm": ("per_tensor", "rowwise"),
    "movement": ("copy", "view", "cat", "index_select", "transpose"),
    "opinfo": (),  # variants: OpInfo full names, found per dtype
}
MODES = ("eager", "compile")


def expand_dtypes(dtypes: list[str]) -> list[str]:
    """'fp8' -> every FP8 format this torch has; float8_* names are checked and kept."""
    found: list[str] = []
    for name in dtypes:
        name = name.strip().lower().removeprefix("torch.")
        names = [n for n in FP8_NAMES if fp8_dtype(n) is not None] if name == "fp8" else [name]
        for n in names:
            if n not in FP8_NAMES:
                raise InputError(f"unknown FP8 dtype {name!r}; use fp8 or one of {', '.join(FP8_NAMES)}.")
            if n not in found:
                found.append(n)
    return found


def plan(dtypes: list[str], *, mode: str, grad: bool = False, subjects: list[str] | None = None) -> list[WorkItem]:
    """The FP8 items for `dtypes` ('fp8' or float8_* names) in one mode.

    `subjects` narrows to some of cast, scaled_mm, movement, opinfo (None: all).
    `grad` is accepted for symmetry with the OpInfo plan; FP8 has no backward items.
    """
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}; use {' or '.join(MODES)}.")
    chosen = list(SUBJECTS) if subjects is None else subjects
    for subject in chosen:
        if subject not in SUBJECTS:
            raise InputError(f"unknown FP8 subject {subject!r}; use {', '.join(SUBJECTS)}.")
    items = []
    for dtype in expand_dtypes(dtypes):
        for subject in chosen:
            variants = SUBJECTS[subject] if subject != "opinfo" else _opinfo_variants(dtype)
            items.extend(WorkItem(SUITE, subject, variant, dtype, mode) for variant in variants)
    return items


def _opinfo_variants(dtype: str) -> list[str]:
    from conformance.fp8.opinfo import fp8_opinfo_names

    return fp8_opinfo_names(dtype)


def prepare(ctx: Any) -> None:
    """Per worker: a place for the dtype probes and the OpInfo table (filled on first use)."""
    ctx.state.setdefault(SUITE, {"probes": {}})


def run_item(item: WorkItem, ctx: Any) -> Result:
    started = time.monotonic()
    result = _run(item, ctx)
    result.duration_s = time.monotonic() - started
    return result


def _run(item: WorkItem, ctx: Any) -> Result:
    from conformance.outcome import describe_exception

    state = ctx.state.setdefault(SUITE, {"probes": {}})
    fp8 = fp8_dtype(item.dtype)
    if fp8 is None:
        return Result.for_item(item, Status.SKIP, message=f"this torch has no {item.dtype} dtype")
    claimed = ctx.adapter.dtype_supported(item.dtype)
    not_ready = _not_ready(item, fp8, ctx, state, claimed)
    if not_ready is not None:
        return not_ready
    try:
        cases = _cases(item, fp8, ctx, state)
    except KeyError as exc:
        return Result.for_item(item, Status.SKIP, claimed=claimed, message=f"no such FP8 item: {exc.args[0]}")
    except Exception as exc:  # making inputs is CPU work: says nothing about the device
        return Result.for_item(item, Status.REF_ERROR, claimed=claimed, message=shorten(describe_exception(exc)))
    if not cases:
        return Result.for_item(item, Status.SKIP, claimed=claimed, message=f"no {item.dtype} samples")
    from conformance.fp8.run import run_cases

    return run_cases(item, cases, ctx, claimed)


def _not_ready(item: WorkItem, fp8: Any, ctx: Any, state: dict, claimed: bool) -> Result | None:
    """UNSUPPORTED (SKIP for fnuz) when the backend has no such FP8 dtype; None when it has."""
    if not claimed:
        why = f"the {ctx.adapter.name} backend declares no {item.dtype} support"
    else:
        if item.dtype not in state["probes"]:
            state["probes"][item.dtype] = _probe(fp8, ctx)
        why = state["probes"][item.dtype]
    if why is None:
        return None
    status = Status.UNSUPPORTED if item.dtype in PRIMARY_FP8 else Status.SKIP
    return Result.for_item(item, status, claimed=False, check="dtype-probe", message=shorten(why))


def _probe(fp8: Any, ctx: Any) -> str | None:
    """Convert two values to `fp8` and back on the device: the reason it lacks the dtype, or None."""
    import torch

    from conformance.outcome import classify_exception, describe_exception

    try:
        torch.tensor([1.0, -2.0]).to(ctx.device).to(fp8).to(torch.float32).cpu()
    except Exception as exc:
        if classify_exception(exc) is Status.UNSUPPORTED:
            return f"no {str(fp8).removeprefix('torch.')} on the device: {describe_exception(exc)}"
    return None  # other failures are the item's to report


def _cases(item: WorkItem, fp8: Any, ctx: Any, state: dict) -> list:
    import torch

    from conformance.fp8 import checks as fp8_checks

    seed = ctx.config.seed
    subject, variant = item.subject, item.variant
    if subject == "cast" and variant in SUBJECTS["cast"]:
        direction, wide = variant.split("_", 1)
        wide_dtype = getattr(torch, wide)
        return fp8_checks.encode_cases(fp8, wide_dtype) if direction == "from" else fp8_checks.decode_cases(fp8, wide_dtype)
    if subject == "scaled_mm" and variant in SUBJECTS["scaled_mm"]:
        return fp8_checks.scaled_mm_cases(fp8, variant, seed)
    if subject == "movement" and variant in SUBJECTS["movement"]:
        return fp8_checks.movement_cases(fp8, variant)
    if subject == "opinfo":
        from conformance.fp8.opinfo import find_opinfo, opinfo_cases

        opinfo = find_opinfo(variant, state)
        if opinfo is not None:
            return opinfo_cases(opinfo, fp8, seed, ctx.config.max_samples)
    raise KeyError(f"{subject}/{variant}")
