"""Running one FP8 item: the dtype probe, its cases (fp8/cases.py), the CPU reference first,
then the device, then the comparison; one Result through the outcome rule."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.compiling.failures import observe_failure
from conformance.fp8.cases import Case
from conformance.fp8.inputs import PRIMARY_FP8, fp8_dtype
from conformance.fp8.plan import SUBJECTS
from conformance.numerics import Comparison, describe_value, first_bit_difference
from conformance.reference.oprecord import record_ops
from conformance.outcome import (
    Missing, NotApplicable, ReferenceFailed, classify_exception, describe_exception, result_for,
)
from conformance.planning import OpsOptions
from op_db.records import Result, Status, WorkItem

TRANSFER_OP = "aten._to_copy.default"
SUITE = "fp8"


def prepare(ctx: Any) -> None:
    """Per worker: a place for the dtype probes and the OpInfo table (filled on first use)."""
    ctx.state.setdefault(SUITE, {"probes": {}})


def run_item(item: WorkItem, ctx: Any) -> Result:
    state = ctx.state.setdefault(SUITE, {"probes": {}})
    fp8 = fp8_dtype(item.dtype)
    if fp8 is None:
        return result_for(item, NotApplicable(f"this torch has no {item.dtype} dtype"))
    claimed = ctx.adapter.dtype_supported(item.dtype)
    not_ready = _not_ready(item, fp8, ctx, state, claimed)
    if not_ready is not None:
        return result_for(item, not_ready, claimed=False, check="dtype-probe")
    try:
        cases = _cases(item, fp8, ctx, state)
    except KeyError as exc:
        return result_for(item, NotApplicable(f"no such FP8 item: {exc.args[0]}"), claimed=claimed)
    except Exception as exc:  # making inputs is CPU work: says nothing about the device
        return result_for(item, ReferenceFailed(describe_exception(exc)), claimed=claimed)
    if not cases:
        return result_for(item, NotApplicable(f"no {item.dtype} samples"), claimed=claimed)
    return run_cases(item, cases, ctx, claimed)


def _not_ready(item: WorkItem, fp8: Any, ctx: Any, state: dict, claimed: bool) -> Missing | NotApplicable | None:
    """Missing when the backend has no such FP8 dtype (NotApplicable for the fnuz formats, which
    are tested only where the backend claims them); None when it has it."""
    if not claimed:
        why = f"the {ctx.adapter.name} backend declares no {item.dtype} support"
    else:
        if item.dtype not in state["probes"]:
            state["probes"][item.dtype] = _probe(fp8, ctx)
        why = state["probes"][item.dtype]
    if why is None:
        return None
    return Missing(why) if item.dtype in PRIMARY_FP8 else NotApplicable(why)


def _probe(fp8: Any, ctx: Any) -> str | None:
    """Convert two values to `fp8` and back on the device: the reason it lacks the dtype, or None."""
    try:
        torch.tensor([1.0, -2.0]).to(ctx.device).to(fp8).to(torch.float32).cpu()
    except Exception as exc:
        if classify_exception(exc) is Status.UNSUPPORTED:
            return f"no {str(fp8).removeprefix('torch.')} on the device: {describe_exception(exc)}"
    return None  # other failures are the item's to report


def _cases(item: WorkItem, fp8: Any, ctx: Any, state: dict) -> list:
    from conformance.fp8 import cases as fp8_cases

    seed = ctx.config.seed
    subject, variant = item.subject, item.variant
    if subject == "cast" and variant in SUBJECTS["cast"]:
        direction, wide = variant.split("_", 1)
        wide_dtype = getattr(torch, wide)
        return fp8_cases.encode_cases(fp8, wide_dtype) if direction == "from" else fp8_cases.decode_cases(fp8, wide_dtype)
    if subject == "scaled_mm" and variant in SUBJECTS["scaled_mm"]:
        return fp8_cases.scaled_mm_cases(fp8, variant, seed)
    if subject == "movement" and variant in SUBJECTS["movement"]:
        return fp8_cases.movement_cases(fp8, variant)
    if subject == "opinfo":
        from conformance.fp8.opinfo import find_opinfo, opinfo_cases

        opinfo = find_opinfo(variant, state)
        if opinfo is not None:
            return opinfo_cases(opinfo, fp8, seed, ctx.config.options_of(OpsOptions).max_samples)
    raise KeyError(f"{subject}/{variant}")




def run_cases(item: WorkItem, cases: list[Case], ctx: Any, claimed: bool) -> Result:
    base = {"claimed": claimed, "check": cases[0].check, "samples": len(cases)}
    try:
        references = [case.fn("cpu", *case.inputs) for case in cases]
    except Exception as exc:
        return result_for(item, ReferenceFailed(describe_exception(exc)), **base)

    comparisons: list[Comparison] = []
    failure: BaseException | None = None
    watch = _item_watch(ctx) if item.mode == "compile" else None
    # Under torch.compile nothing is recorded: Dynamo declines to compile while a dispatch mode
    # is active, and would test eager instead. The graphs' own ops are the item's ops then.
    recording = contextlib.nullcontext(None) if watch is not None else record_ops(ctx.device_type)
    with ctx.adapter.track_fallbacks() as fallbacks, recording as recorder:
        for case, reference in zip(cases, references):
            try:
                inputs = [t.to(ctx.device) for t in case.inputs]
                comparison = _transfer_check(case.inputs, inputs)
                if comparison is None:
                    comparison = case.judge(_on_device(case, inputs, ctx, watch), reference, case.inputs)
            except Exception as exc:
                failure = exc
                break
            comparisons.append(comparison)

    fields = dict(samples_passed=sum(c.ok for c in comparisons), fallback_ops=sorted(fallbacks.ops), **base)
    observed: Any = failure
    if watch is None:
        fields["aten_ops"] = dict(recorder.ops)
    else:
        phase = watch.failure_phase(failure) if failure is not None else None
        if failure is not None:
            observed = observe_failure(failure, phase)
        facts = watch.facts(phase=phase)
        fields["compile"] = facts.to_dict()
        fields["aten_ops"] = {op: 1 for op in facts.graph_ops}
    if failure is not None:
        result = result_for(item, observed, failing_op=recorder.failing_op if recorder else None,
                            first_failure=f"{cases[len(comparisons)].label}: raised", **fields)
        _add_errors(result, comparisons)
        return result
    failed = next((i for i, c in enumerate(comparisons) if not c.ok), None)
    if failed is None:
        total = Comparison(True, cases[0].check)
        result = result_for(item, total, fallback=bool(fields["fallback_ops"]), **fields)
    else:
        comparison = comparisons[failed]
        failing_op = TRANSFER_OP if comparison.where.startswith("transfer") else cases[failed].op
        result = result_for(item, comparison, first_failure=f"{cases[failed].label}: {comparison.where}",
                            failing_op=failing_op, **fields)
    _add_errors(result, comparisons)
    return result


def _transfer_check(inputs: list[torch.Tensor], on_device: list[torch.Tensor]) -> Comparison | None:
    """A failing comparison when moving the inputs to the device and back changes a bit, so that
    a broken transfer is not blamed on the op under test; None when every bit survives."""
    for number, (sent, there) in enumerate(zip(inputs, on_device)):
        back = there.cpu()
        index = first_bit_difference(back, sent) if back.dtype == sent.dtype else 0
        if index is not None:
            where = f"transfer of input {number}, element {index}"
            detail = (f"moving input {number} ({sent.dtype}) to the device and back changed it; first at element "
                      f"{index}: sent {describe_value(sent, index)}, got back {describe_value(back, index)}")
            return Comparison(False, "exact", detail, where=where)
    return None


def _item_watch(ctx: Any) -> Any:
    """One CompileWatch for the whole item, as OpInfo has: its facts become the `compile` record."""
    from conformance.compiling.watch import CompileWatch

    return CompileWatch(ctx.compile_backend, ctx.config.compile)


def _on_device(case: Case, inputs: list[torch.Tensor], ctx: Any, watch: Any) -> Any:
    if watch is None:
        output = case.fn(ctx.device, *inputs)
    else:
        with watch:
            output = watch.compile(case.fn, dynamic=False)(ctx.device, *inputs)
    ctx.adapter.synchronize()
    return pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, output)


def _add_errors(result: Result, comparisons: list[Comparison]) -> None:
    """Worst errors over all compared samples, pass or fail (DESIGN.md: show how close a PASS was)."""
    def worst(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return max(present) if present else None

    result.max_abs_err = worst([c.max_abs_err for c in comparisons])
    result.max_rel_err = worst([c.max_rel_err for c in comparisons])
    result.err_ratio = worst([c.err_ratio for c in comparisons])
    bound_ratio = worst([c.bound_ratio for c in comparisons])
    if bound_ratio is not None:
        result.extra["bound_ratio"] = bound_ratio
