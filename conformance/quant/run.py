"""Running one quant item: the recipe on the CPU (the reference), its float64 oracle, then the
same recipe applied on the device to the same weights; one Result through the outcome rule.

Inference recipes: the quantized tensors quantize_ made on the device are compared with the
CPU's (integer tensors exactly, float scales by the numerics rule), then the output by the
numerics rule against the CPU's output and the oracle (conformance/quant/recipes.py). A recipe
torchao cannot build on the CPU is SKIP with torchao's own words. The quantization error of the
CPU's quantized output against the unquantized one (SQNR in dB, max error) is information in
`extra`, never a failure. Training recipes are conformance/quant/training.py's.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import torch

from conformance.numerics import Comparison, compare
from conformance.outcome import NotApplicable, ReferenceFailed, describe_exception, result_for
from conformance.quant import apply, recipes, targets
from conformance.quant.judge import compare_weights, cpu_refusal, finish, watch_of
from conformance.quant.plan import TRAINING
from conformance.reference.oprecord import record_ops
from op_db.records import Result, WorkItem

SUITE = "quant"


def preload() -> None:
    import torchao.quantization  # noqa: F401 - slow import, done before the first item


def prepare(ctx: Any) -> None:
    ctx.state.setdefault(SUITE, {})


def run_item(item: WorkItem, ctx: Any) -> Result:
    dtype = getattr(torch, item.dtype)
    try:
        target = targets.build(item.variant, dtype, ctx.config.seed)
    except KeyError as exc:
        return result_for(item, NotApplicable(f"no such quant target: {exc.args[0]}"))
    except Exception as exc:  # building a tiny model is CPU work
        return result_for(item, ReferenceFailed(describe_exception(exc)))
    if item.subject in TRAINING:
        from conformance.quant import training

        return training.run(item, ctx, target, dtype)
    return _inference(item, ctx, target, dtype)


def _inference(item: WorkItem, ctx: Any, target: targets.Target, dtype: torch.dtype) -> Result:
    try:
        config = recipes.config(item.subject, target.group_size)
    except KeyError:
        return result_for(item, NotApplicable(f"no such quant recipe: {item.subject}"))
    except Exception as exc:
        return result_for(item, cpu_refusal(item.subject, exc))
    quantized = copy.deepcopy(target.module)
    try:
        choice = apply.module_filter(target.module, config)
        apply.quantize(quantized, config, choice)
    except Exception as exc:
        return result_for(item, cpu_refusal(item.subject, exc))
    weights = recipes.quantized_weights(quantized)
    if not weights:
        why = (" (it quantizes nn.Linear weights only, and keeps the output embeddings, tied weights and the last "
               "module unquantized)") if choice is not None else ""
        how = "TorchAoConfig" if choice is not None else item.subject
        return result_for(item, NotApplicable(f"{how} quantized no nn.Linear of {item.variant}{why}"))
    try:
        with torch.no_grad():
            reference = target.call(quantized, target.inputs)
            unquantized = target.call(target.module, target.inputs)
    except Exception as exc:
        return result_for(item, ReferenceFailed(describe_exception(exc)))
    extra = {"quantized_weights": len(weights), **quantization_error(reference, unquantized)}
    try:
        with torch.no_grad():
            oracle = target.call(recipes.oracle_module(quantized, dtype), _wide(target.inputs))
    except Exception as exc:  # a kernel with no float64 (MoE grouped_mm): the CPU's output is the reference
        oracle, extra["oracle"] = None, f"no float64 oracle: {describe_exception(exc)}"
    base = {"check": "quantized-weights+output", "samples": len(weights) + 1, "extra": extra}
    return _on_device(item, ctx, target, (config, choice), weights, reference, oracle, base)


def _on_device(item, ctx, target, recipe, weights, reference, oracle, base) -> Result:
    watch = watch_of(ctx) if item.mode == "compile" else None
    recording = contextlib.nullcontext(None) if watch is not None else record_ops(ctx.device_type, into_subclasses=True)
    comparisons: list[tuple[str, Comparison]] = []
    failure: BaseException | None = None
    with ctx.adapter.track_fallbacks() as fallbacks, recording as recorder:
        try:
            module = copy.deepcopy(target.module).to(ctx.device)
            apply.quantize(module, *recipe)
            device_weights = recipes.quantized_weights(module)
            comparisons.extend(compare_weights(weights, device_weights))
            inputs = targets.to_device(target.inputs, ctx.device)
            with torch.no_grad():
                if watch is None:
                    output = target.call(module, inputs)
                else:
                    with watch:
                        output = watch.compile(lambda *a: target.call(module, a), dynamic=False)(*inputs)
            ctx.adapter.synchronize()
            comparisons.append(("output", compare(output.cpu(), reference, oracle)))
        except Exception as exc:
            failure = exc
    return finish(item, comparisons, failure, recorder, watch, fallbacks, base)


def quantization_error(quantized: torch.Tensor, unquantized: torch.Tensor) -> dict[str, float]:
    """SQNR (dB) and max |error| of the CPU's quantized output against the unquantized one."""
    q, u = quantized.double(), unquantized.double()
    noise = (q - u).norm().item()
    sqnr = float("inf") if noise == 0 else 20 * torch.log10(u.norm() / noise).item()
    return {"sqnr_db": round(sqnr, 2), "quant_max_abs_err": (q - u).abs().max().item()}


def _wide(inputs: tuple) -> tuple:
    return tuple(t.to(torch.float64) if t.is_floating_point() else t for t in inputs)

