"""Running one kernels item in a worker: opcheck items (checks.py) and numerics items here.

A numerics item runs every sample through the reference on the CPU first (in the item's dtype,
and in float64 as the oracle), then through the op on the device, eagerly or inside
torch.compile(fullgraph=True), and judges each output (or each gradient) by the numerics
rule: within assert_close's tolerances of the reference, or no further from the oracle than
the reference in the same dtype is, times the rule's multiplier (the flash-attention test
bound). The first failing sample is named by its label: shapes, strides and arguments.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.kernels import checks, sampling as smp
from conformance.kernels.plan import OPCHECKS, KernelOptions
from conformance.kernels.specs import families_by_op, reference_fn, sample_fn
from conformance.kernels.target import load, resolve
from conformance.numerics import Comparison, compare
from conformance.reference.oprecord import record_ops
from conformance.outcome import NotApplicable, ReferenceFailed, describe_exception, result_for
from op_db.records import Result, WorkItem

SUITE = "kernels"


@dataclasses.dataclass
class Expected:
    """The reference side of one sample: the value in the item's dtype, the float64 oracle
    (None when the reference cannot run in float64 or float32) and, for backward, the cotangents."""

    value: Any
    oracle: Any
    cotangents: list[torch.Tensor] | None = None


def prepare(ctx: Any) -> None:
    """Per worker: import TARGET (its ops register in this process) and a place for samples."""
    load(ctx.config.options_of(KernelOptions).target)
    ctx.state.setdefault(SUITE, {"samples": {}})


def run_item(item: WorkItem, ctx: Any) -> Result:
    state = ctx.state.setdefault(SUITE, {"samples": {}})
    options = ctx.config.options_of(KernelOptions)
    dtype = getattr(torch, item.dtype)
    backward = item.variant == "backward"
    # The autograd registration test checks nothing unless an input requires grad (an op
    # without an autograd formula passes it); aot_dispatch_dynamic checks backward with --grad.
    requires_grad = dtype.is_floating_point and (backward or item.variant == "opcheck.autograd_registration"
                                                 or (item.variant == "opcheck.aot_dispatch_dynamic" and options.grad))
    try:
        samples = _samples(item.subject, dtype, requires_grad, options, state, ctx.config.seed)
    except Exception as exc:  # the library's sample generator failed: CPU work, nothing about the device
        return result_for(item, ReferenceFailed(f"making samples failed: {describe_exception(exc)}"))
    if not samples:
        return result_for(item, NotApplicable(f"the samples of {item.subject} give none in {item.dtype}"))
    if item.variant in OPCHECKS:
        return checks.opcheck_item(item, samples, ctx)
    if item.mode == "compile":
        samples = checks.compile_samples(samples, dynamic=ctx.config.compile.dynamic)
    return judge(item, samples, ctx, backward=backward)


def _samples(name: str, dtype: torch.dtype, requires_grad: bool, options: KernelOptions, state: dict,
             seed: int) -> list[smp.Sample]:
    key = (name, dtype, requires_grad)
    if key not in state["samples"]:
        generate = sample_fn(name, families_by_op(options.family))
        state["samples"][key] = smp.make_samples(generate, dtype, requires_grad, seed, options.max_samples)
    return state["samples"][key]


def judge(item: WorkItem, samples: list[smp.Sample], ctx: Any, *, backward: bool) -> Result:
    reference, op = reference_fn(item.subject), resolve(item.subject)
    try:
        expected = [_expected(reference, sample, backward, ctx.config.seed + index)
                    for index, sample in enumerate(samples)]
    except Exception as exc:
        return result_for(item, ReferenceFailed(f"the reference failed: {describe_exception(exc)}"),
                          samples=len(samples))
    compiled = checks.CompiledOp(op, ctx) if item.mode == "compile" else None
    comparisons: list[Comparison] = []
    failure: BaseException | None = None
    # Dynamo declines to compile under a dispatch mode: compiled items report their graphs' ops.
    recording = record_ops(ctx.device_type) if compiled is None else contextlib.nullcontext(None)
    with ctx.adapter.track_fallbacks() as fallbacks, recording as recorder:
        for sample, want in zip(samples, expected):
            try:
                got = _on_device(compiled or op, smp.to_device(sample, ctx.device), want, backward, ctx)
                if compiled is not None:
                    compiled.check_no_recompile(sample)
            except Exception as exc:
                failure = exc
                break
            comparisons.append(compare(got, want.value, want.oracle))
    fields: dict[str, Any] = {"samples": len(samples), "samples_passed": sum(c.ok for c in comparisons),
                              "fallback_ops": sorted(fallbacks.ops), "check": "numerics",
                              "aten_ops": dict(recorder.ops) if recorder is not None else {}}
    if compiled is not None:
        fields.update(compiled.fields(failure))
    _worst_errors(fields, comparisons)
    if failure is not None:
        observed = compiled.observation(failure) if compiled is not None else failure
        return result_for(item, observed, failing_op=(recorder and recorder.failing_op) or str(op),
                          first_failure=f"sample {len(comparisons)} ({samples[len(comparisons)].label}): raised",
                          **fields)
    failed = next((i for i, c in enumerate(comparisons) if not c.ok), None)
    if failed is None:
        return result_for(item, Comparison(True, "numerics"), fallback=bool(fields["fallback_ops"]), **fields)
    comparison = comparisons[failed]
    where = comparison.where or comparison.reason
    return result_for(item, comparison, failing_op=str(op), first_failure=f"sample {failed} ({samples[failed].label}): "
                      f"{where}", **fields)


def _expected(reference: Any, sample: smp.Sample, backward: bool, seed: int) -> Expected:
    value = _run(reference, smp.fresh(sample), backward, None)
    cotangents = None
    if backward:
        value, cotangents = value
    oracle = None
    for wide in (torch.float64, torch.float32):
        try:
            oracle = _run(reference, smp.cast(smp.fresh(sample), wide), backward, cotangents)
        except Exception:  # noqa: BLE001 - a reference that cannot run wide: judged by the tolerances alone
            continue
        oracle = oracle[0] if backward else oracle
        break
    return Expected(value, oracle, cotangents)


def _run(fn: Any, sample: smp.Sample, backward: bool, cotangents: list[torch.Tensor] | None) -> Any:
    """Forward: the output. Backward: (gradients of the inputs that require grad, cotangents);
    the cotangents are drawn from the output the first time (seeded) and reused after, cast."""
    if not backward:
        with torch.no_grad():
            return smp.to_cpu(fn(*sample.args, **sample.kwargs))
    inputs = [t for t in sample.leaves() if t.requires_grad]
    outputs = [t for t in pytree.tree_leaves(fn(*sample.args, **sample.kwargs))
               if isinstance(t, torch.Tensor) and t.requires_grad]
    if cotangents is None:
        generator = torch.Generator().manual_seed(0)
        cotangents = [torch.randn(o.shape, generator=generator, dtype=torch.float32) for o in outputs]
    grads = torch.autograd.grad(outputs, inputs, [c.to(o.dtype).to(o.device) for c, o in zip(cotangents, outputs)],
                                allow_unused=True)
    return smp.to_cpu(tuple(grads)), cotangents


def _on_device(fn: Any, sample: smp.Sample, want: Expected, backward: bool, ctx: Any) -> Any:
    result = _run(fn, sample, backward, want.cotangents)
    ctx.adapter.synchronize()
    return result[0] if backward else result


def _worst_errors(fields: dict[str, Any], comparisons: list[Comparison]) -> None:
    """Worst errors over all compared samples, pass or fail (DESIGN.md: show how close a PASS was)."""
    for name in ("max_abs_err", "max_rel_err", "err_ratio"):
        values = [getattr(c, name) for c in comparisons if getattr(c, name) is not None]
        fields[name] = max(values) if values else None
