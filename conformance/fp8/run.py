"""Running FP8 cases: the CPU reference first, then the device, then the judge; one Result."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.fp8.checks import Case, Verdict, first_bit_difference
from conformance.fp8.inputs import describe_value
from conformance.oprecord import record_ops
from op_db.records import Result, Status, WorkItem, shorten

TRANSFER_OP = "aten._to_copy.default"


def run_cases(item: WorkItem, cases: list[Case], ctx: Any, claimed: bool) -> Result:
    from conformance.outcome import classify_exception, describe_exception

    base = {"claimed": claimed, "check": cases[0].check, "samples": len(cases)}
    try:
        references = [case.fn("cpu", *case.inputs) for case in cases]
    except Exception as exc:
        return Result.for_item(item, Status.REF_ERROR, message=shorten(describe_exception(exc)), **base)

    verdicts: list[Verdict] = []
    failure: BaseException | None = None
    with ctx.adapter.track_fallbacks() as fallbacks, record_ops(ctx.device_type) as recorder:
        for case, reference in zip(cases, references):
            try:
                inputs = [t.to(ctx.device) for t in case.inputs]
                verdict = _transfer_verdict(case.inputs, inputs)
                if verdict is None:
                    verdict = case.judge(_on_device(case, inputs, ctx, item.mode == "compile"), reference, case.inputs)
            except Exception as exc:
                failure = exc
                break
            verdicts.append(verdict)

    result = Result.for_item(
        item, Status.PASS, samples_passed=sum(v.ok for v in verdicts),
        aten_ops=dict(recorder.ops), fallback_ops=sorted(fallbacks.ops), **base,
    )
    _add_errors(result, verdicts)
    if failure is not None:
        result.status = classify_exception(failure)
        result.message = shorten(describe_exception(failure))
        result.failing_op = recorder.failing_op
        result.first_failure = f"{cases[len(verdicts)].label}: raised"
        return result
    failed = next((i for i, v in enumerate(verdicts) if not v.ok), None)
    if failed is not None:
        verdict = verdicts[failed]
        result.status = Status.MISMATCH
        result.first_failure = f"{cases[failed].label}: {verdict.where}"
        result.message = shorten(verdict.detail)
        result.failing_op = TRANSFER_OP if verdict.where.startswith("transfer") else cases[failed].op
    elif result.fallback_ops:
        result.status = Status.FALLBACK
    return result


def _transfer_verdict(inputs: list[torch.Tensor], on_device: list[torch.Tensor]) -> Verdict | None:
    """A failing verdict when moving the inputs to the device and back changes a bit, so that
    a broken transfer is not blamed on the op under test; None when every bit survives."""
    for number, (sent, there) in enumerate(zip(inputs, on_device)):
        back = there.cpu()
        index = first_bit_difference(back, sent) if back.dtype == sent.dtype else 0
        if index is not None:
            where = f"transfer of input {number}, element {index}"
            detail = (f"moving input {number} ({sent.dtype}) to the device and back changed it; first at element "
                      f"{index}: sent {describe_value(sent, index)}, got back {describe_value(back, index)}")
            return Verdict(False, where, detail)
    return None


def _on_device(case: Case, inputs: list[torch.Tensor], ctx: Any, compiled: bool) -> Any:
    fn = torch.compile(case.fn, backend=ctx.compile_backend, dynamic=False) if compiled else case.fn
    output = fn(ctx.device, *inputs)
    ctx.adapter.synchronize()
    return pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, output)


def _add_errors(result: Result, verdicts: list[Verdict]) -> None:
    """Worst errors over all compared samples, pass or fail (DESIGN.md: show how close a PASS was)."""
    def worst(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return max(present) if present else None

    result.max_abs_err = worst([v.max_abs_err for v in verdicts])
    result.max_rel_err = worst([v.max_rel_err for v in verdicts])
    result.err_ratio = worst([v.err_ratio for v in verdicts])
    bound_ratio = worst([v.bound_ratio for v in verdicts])
    if bound_ratio is not None:
        result.extra["bound_ratio"] = bound_ratio
