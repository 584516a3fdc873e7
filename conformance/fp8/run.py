"""Running FP8 cases: the CPU reference first, then the device, then the judge; one Result."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.fp8.cases import Case
from conformance.numerics import Comparison, describe_value, first_bit_difference
from conformance.oprecord import record_ops
from conformance.outcome import ReferenceFailed, describe_exception, result_for
from op_db.records import Result, WorkItem

TRANSFER_OP = "aten._to_copy.default"


def run_cases(item: WorkItem, cases: list[Case], ctx: Any, claimed: bool) -> Result:
    base = {"claimed": claimed, "check": cases[0].check, "samples": len(cases)}
    try:
        references = [case.fn("cpu", *case.inputs) for case in cases]
    except Exception as exc:
        return result_for(item, ReferenceFailed(describe_exception(exc)), **base)

    comparisons: list[Comparison] = []
    failure: BaseException | None = None
    with ctx.adapter.track_fallbacks() as fallbacks, record_ops(ctx.device_type) as recorder:
        for case, reference in zip(cases, references):
            try:
                inputs = [t.to(ctx.device) for t in case.inputs]
                comparison = _transfer_check(case.inputs, inputs)
                if comparison is None:
                    comparison = case.judge(_on_device(case, inputs, ctx, item.mode == "compile"), reference, case.inputs)
            except Exception as exc:
                failure = exc
                break
            comparisons.append(comparison)

    fields = dict(samples_passed=sum(c.ok for c in comparisons), aten_ops=dict(recorder.ops),
                  fallback_ops=sorted(fallbacks.ops), **base)
    if failure is not None:
        result = result_for(item, failure, failing_op=recorder.failing_op,
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


def _on_device(case: Case, inputs: list[torch.Tensor], ctx: Any, compiled: bool) -> Any:
    fn = torch.compile(case.fn, backend=ctx.compile_backend, dynamic=False) if compiled else case.fn
    output = fn(ctx.device, *inputs)
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
