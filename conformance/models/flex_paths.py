"""The model's own flex_attention path on the CPU, without the tool: the two checks that tell a
model's fault from the backend's in `models --attn flex_attention`.

A flex item is judged against the same weights attending eagerly on the CPU. That is a fair
reference only where the model's flex path computes what its eager path does. Two ways it may not:

* it fails on the CPU too (`fails_on_cpu`): T5's flex score_mod indexes a batch-1 position bias by
  the batch index;
* it runs, and computes something else (`disagreement`): Transformers' generic flex integration
  adds `score_mask[batch][0][q][kv]`, head 0 of an additive mask, to every head, so Parakeet's
  per-head relative-position scores reach head 0 alone; Doge's dynamic mask replaces the causal
  BlockMask, so its flex path attends to later tokens.

Either way the eager CPU run is no reference for the device's flex run, and the item is REF_ERROR
("model bug on CPU: ..."): it says nothing about the backend. Both checks run a forward with no
gradient, flex compiled with dynamo's plain "eager" backend (PyTorch's own dense kernel for the
CPU), none of the tool's instrumentation.
"""

from __future__ import annotations

from conformance.models.cpu_runs import RefFailure, copy_model, on_cpu, oracle_copy
from op_db.records import shorten

MODEL_BUG = "model bug on CPU: its flex_attention path"


def forget_compiled_flex() -> None:
    """Transformers compiles flex attention once per process (its WrappedFlexAttention singleton),
    with whatever default backend is set at that first call; forgetting it makes the next call
    compile with the backend set now (the device's compiler, or "eager" for the CPU check)."""
    from transformers.integrations import flex_attention

    wrapped = getattr(flex_attention, "WrappedFlexAttention", None)
    if wrapped is not None and hasattr(wrapped, "_is_flex_compiled"):
        wrapped._is_flex_compiled = False


def fails_on_cpu(ctx, base, inputs, dtype, seed) -> str | None:
    """The REF_ERROR message where the model's own flex path fails on the CPU too; then the
    device's failure is the model's, not the backend's."""
    try:
        _flex_forward(ctx, base, inputs, dtype, seed)
    except RefFailure as exc:
        cause = exc.__cause__ or exc
        return shorten(f"{MODEL_BUG} fails on the CPU too, without the tool: {type(cause).__name__}: {cause}", 400)
    return None


def disagreement(ctx, base, inputs, dtype, seed) -> str | None:
    """The REF_ERROR message where the model's flex path, run on the CPU in float64, fails the
    numerics rule against its eager path (the item's dtype as the reference, float64 as the
    oracle): a float64 run of a flex path that computes the eager path's function is at least as
    close to the oracle as the reference is, so failing says the two paths compute different
    functions. None where they agree, or where a run fails (the device's comparison then stands).

    Forward outputs are compared in every variant: PyTorch has no flex backward on the CPU, and
    where the forwards differ the gradients do too."""
    import torch

    from conformance.models.judges import judge_logits
    from conformance.models.passes import run_forward

    try:
        with torch.no_grad():
            ref = on_cpu(run_forward, copy_model(base, "cpu", dtype), inputs, dtype, seed)
            hi = on_cpu(run_forward, oracle_copy(base), inputs, torch.float64, seed)
        flex = _flex_forward(ctx, base, inputs, torch.float64, seed)
    except RefFailure:
        return None
    judged = judge_logits(_cast(flex, dtype), ref, hi)
    if judged.ok:
        return None
    size = judged.reason if judged.max_abs_err is None else f"max abs err {judged.max_abs_err:.3g}"
    ratio = f", {judged.err_ratio:.3g}x the eager run's error vs the float64 oracle" if judged.err_ratio else ""
    return shorten(f"{MODEL_BUG} disagrees with its eager path on the CPU, without the tool: its flex forward in "
                   f"float64 fails the numerics rule against its eager forward ({size}{ratio})"
                   f", so the eager reference is no reference for the device's flex run", 400)


def _flex_forward(ctx, base, inputs, dtype, seed):
    """The model's forward on the CPU in `dtype`, attending through flex (raises RefFailure)."""
    import torch

    from conformance.compiling.settings import default_compiler
    from conformance.models.passes import run_forward

    model = copy_model(base, "cpu", dtype)
    model.set_attn_implementation("flex_attention")
    forget_compiled_flex()
    try:
        with torch.no_grad(), default_compiler(ctx.config.compile, "eager"):
            return on_cpu(run_forward, model, inputs, dtype, seed)
    finally:
        forget_compiled_flex()


def _cast(value, dtype):
    """`value` with every floating-point tensor cast to `dtype` (rule 1 wants the reference's dtype)."""
    import torch
    from torch.utils import _pytree as pytree

    return pytree.tree_map(lambda t: t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t,
                           value)
