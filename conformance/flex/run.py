"""Running one flex attention item in a worker.

The reference is the variant's dense math on the CPU in the item's dtype, the oracle the same
in float64; the device runs flex_attention (eagerly, or torch.compile(flex_attention) on the
backend's compiler) and each output, or each gradient (q, k, v and a learned bias), is judged
by the numerics rule. A backend that refuses flex attention is UNSUPPORTED with PyTorch's words
and the device type.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.flex import variants as fv
from conformance.flex.refusal import FORWARD_OP, refusal
from conformance.numerics import compare
from conformance.reference.oprecord import record_ops
from conformance.outcome import RegistrationFailed, ReferenceFailed, describe_exception, result_for
from op_db.records import Result, WorkItem

SUITE = "flex_attention"


def prepare(ctx: Any) -> None:
    ctx.state.setdefault(SUITE, {})


def _outputs(result: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(result) if isinstance(t, torch.Tensor)]


def _run(fn: Any, s: fv.Sample, backward: bool, cotangents: list[torch.Tensor] | None = None) -> tuple:
    """(CPU copies of the outputs, or of the gradients, cotangents used)."""
    if not backward:
        with torch.no_grad():
            return [t.detach().cpu() for t in _outputs(fn(s))], None
    outs = [t for t in _outputs(fn(s))[:1]]  # the attention output (lse has no gradient here)
    if cotangents is None:
        gen = torch.Generator().manual_seed(1)
        cotangents = [torch.randn(o.shape, generator=gen) for o in outs]
    inputs = s.grad_inputs()
    grads = torch.autograd.grad(outs, inputs, [c.to(o.dtype).to(o.device) for c, o in zip(cotangents, outs)],
                                allow_unused=True)
    return [g.detach().cpu() if g is not None else None for g in grads], cotangents


def _flex(ctx: Any, mode: str):
    from torch.nn.attention.flex_attention import flex_attention

    if mode != "compile":
        return flex_attention, None
    from conformance.compiling.watch import CompileWatch

    # Every item compiles the one flex_attention code object: what earlier items left in its
    # cache (another backend, static shapes, a trace a refusal cut short) must not count as
    # this item's recompiles, so each compiles afresh.
    torch._dynamo.reset()
    watch = CompileWatch(ctx.compile_backend, ctx.config.compile)
    compiled = watch.compile(flex_attention, dynamic=ctx.config.compile.dynamic or None)

    def run(*args, **kwargs):
        with watch:
            return compiled(*args, **kwargs)
    return run, watch


def run_item(item: WorkItem, ctx: Any) -> Result:
    dtype, backward = getattr(torch, item.dtype), item.variant == "backward"
    seed = ctx.config.seed
    base = fv.sample(item.subject, seed)
    try:
        want, cotangents = _run(fv.dense, base.on("cpu", dtype, backward), backward)
        oracle, _ = _run(fv.dense, base.on("cpu", torch.float64, backward), backward, cotangents)
    except Exception as exc:  # noqa: BLE001 - the CPU side failed: nothing about the device
        return result_for(item, ReferenceFailed(f"the dense reference failed: {describe_exception(exc)}"))
    flex, watch = _flex(ctx, item.mode)
    fields: dict[str, Any] = {"samples": 1, "check": "numerics"}
    # Eager items record the ops flex runs (the HOP and the ops inside it); dynamo declines to
    # compile user code under a dispatch mode, so compiled items report their graphs instead.
    recording = record_ops(ctx.device_type) if watch is None else contextlib.nullcontext(None)
    with ctx.adapter.track_fallbacks() as fallbacks, recording as recorder:
        try:
            got, _ = _run(lambda s: fv.run_flex(s, flex), base.on(ctx.device, dtype, backward), backward, cotangents)
            ctx.adapter.synchronize()
            if watch is not None and ctx.config.compile.dynamic:
                before = watch.facts().recompiles
                _run(lambda s: fv.run_flex(s, flex), fv.sample(item.subject, seed, grow=8).on(ctx.device, dtype, backward),
                     backward)
                if watch.facts().recompiles > before:
                    return result_for(item, RegistrationFailed(
                        "torch.compile(flex_attention) recompiled under --dynamic for a second length"),
                        failing_op=FORWARD_OP, compile=watch.facts().to_dict(), **fields)
        except Exception as exc:  # noqa: BLE001 - judged below
            if (refused := refusal(exc, torch.device(ctx.device).type)) is not None:
                return result_for(item, refused, failing_op=FORWARD_OP, **fields)
            return result_for(item, exc, failing_op=(recorder and recorder.failing_op)
                              or "higher_order.flex_attention", **fields)
    fields["fallback_ops"] = sorted(fallbacks.ops)
    fields["aten_ops"] = dict(recorder.ops) if recorder is not None else {}
    if watch is not None:
        fields["compile"] = watch.facts().to_dict()
    comparison = compare(tuple(got), tuple(want), tuple(oracle))
    fields.update(max_abs_err=comparison.max_abs_err, max_rel_err=comparison.max_rel_err, err_ratio=comparison.err_ratio)
    if comparison.ok:
        return result_for(item, comparison, fallback=bool(fields["fallback_ops"]), samples_passed=1, **fields)
    op = "higher_order.flex_attention_backward" if backward else "higher_order.flex_attention"
    return result_for(item, comparison, failing_op=op, first_failure=comparison.where or comparison.reason,
                      samples_passed=0, **fields)
