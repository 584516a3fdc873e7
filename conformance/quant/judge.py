"""The quant suite's judgement, shared by inference and training items: named comparisons (the
quantized tensors, the output, the gradients) to one Result through the outcome rule."""

from __future__ import annotations

from typing import Any

import torch

from conformance.numerics import Comparison, compare
from conformance.outcome import NotApplicable, describe_exception, result_for
from conformance.quant import recipes
from op_db.records import Result


def cpu_refusal(recipe: str, error: BaseException) -> NotApplicable:
    return NotApplicable(f"torchao cannot build {recipe} on the CPU: {describe_exception(error)}")

def finish(item, comparisons, failure, recorder, watch, fallbacks, base) -> Result:
    """The Result of an item's named comparisons, or of the device's failure."""
    fields = dict(base, samples_passed=sum(c.ok for _, c in comparisons), fallback_ops=sorted(fallbacks.ops))
    if failure is None:
        fields["samples"] = len(comparisons)
    if watch is None:
        fields["aten_ops"] = dict(recorder.ops)
    else:
        fields["compile"] = watch.facts(phase=watch.failure_phase(failure) if failure else None).to_dict()
        fields["aten_ops"] = {op: 1 for op in fields["compile"].get("graph_ops", [])}
    if failure is not None:
        return result_for(item, failure, failing_op=recorder.failing_op if recorder else None,
                          first_failure=f"after {len(comparisons)} checks: raised", **fields)
    failed = next(((label, c) for label, c in comparisons if not c.ok), None)
    if failed is None:
        total = Comparison(True, "exact")
        for _, comparison in comparisons:
            total = total.merge(comparison)
        result = result_for(item, total, fallback=bool(fields["fallback_ops"]), **fields)
    else:
        label, comparison = failed
        result = result_for(item, comparison, first_failure=f"{label}: {comparison.where or comparison.reason}",
                            **fields)
    errors = [c for _, c in comparisons]
    result.max_abs_err = worst([c.max_abs_err for c in errors])
    result.max_rel_err = worst([c.max_rel_err for c in errors])
    result.err_ratio = worst([c.err_ratio for c in errors])
    return result

def compare_weights(cpu: dict[str, torch.Tensor], device: dict[str, torch.Tensor]) -> list[tuple[str, Comparison]]:
    """Each quantized tensor's inner tensors, device against CPU: integer ones exactly."""
    found = []
    for name, weight in cpu.items():
        there = device.get(name)
        if there is None or type(there) is not type(weight):
            what = "a plain tensor" if there is None else type(there).__name__
            found.append((f"weight {name}", Comparison(False, "structure", f"quantize_ made {what} on the device "
                                                       f"where the CPU made {type(weight).__name__}")))
            continue
        found.extend(compare_inner(f"weight {name}", weight, there))
    return found

def compare_inner(label: str, cpu: torch.Tensor, device: torch.Tensor) -> list[tuple[str, Comparison]]:
    found = []
    device_inner = recipes.inner_tensors(device)
    for inner, value in recipes.inner_tensors(cpu).items():
        exact = not (value.is_floating_point() and value.element_size() > 1)
        found.append((f"{label}.{inner}", compare(device_inner[inner].cpu(), value, exact=exact)))
    return found

def watch_of(ctx: Any) -> Any:
    from conformance.compiling.watch import CompileWatch

    return CompileWatch(ctx.compile_backend, ctx.config.compile)

def worst(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None

