"""The quant suite's training recipes: each a step on the device against the same step on the CPU.

    qat_fake_quant   QATConfig(int8 dynamic activation + int4 weight, prepare): forward and
                     backward through the fake-quantized linears; output, input and parameter
                     gradients judged, the oracle the prepared model in float64
    float8_training  torchao.float8.convert_to_float8_training: forward, backward, one AdamW
                     step; output, gradients and updated parameters judged
    adamw_8bit/4bit/fp8  torchao.optim's low-bit AdamW: one step from the same parameters and
                     gradients; the updated parameters judged against a float64 AdamW step (after
                     one step from zero state the quantized state has not yet been read), the
                     optimizer's quantized state (codes, scales) compared exactly

torchao compiles the optimizer's step (torch.compile, fullgraph); in eager mode the step runs
uncompiled on both sides, so the item tests the backend's eager ops; compile mode keeps it.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import torch

from conformance.numerics import compare
from conformance.outcome import NotApplicable, ReferenceFailed, describe_exception, result_for
from conformance.quant import targets
from conformance.quant.judge import compare_inner, cpu_refusal, finish
from conformance.reference.oprecord import record_ops
from op_db.records import Result, WorkItem

LR, BETAS, EPS, WEIGHT_DECAY = 1e-2, (0.9, 0.999), 1e-8, 1e-2
OPTIMIZERS = {"adamw_8bit": "AdamW8bit", "adamw_4bit": "AdamW4bit", "adamw_fp8": "AdamWFp8"}


def run(item: WorkItem, ctx: Any, target: targets.Target, dtype: torch.dtype) -> Result:
    if item.subject in OPTIMIZERS:
        return _optimizer(item, ctx, target)
    prepare = _qat if item.subject == "qat_fake_quant" else _float8
    try:
        module = prepare(copy.deepcopy(target.module), target.group_size)
    except Exception as exc:
        return result_for(item, cpu_refusal(item.subject, exc))
    try:
        oracle_module = copy.deepcopy(module).to(torch.float64)
        reference = _step(module, target, "cpu", item.subject)
    except Exception as exc:
        return result_for(item, ReferenceFailed(describe_exception(exc)))
    try:
        oracle = _step(oracle_module, target, "cpu", item.subject, wide=True)
    except Exception:  # torchao's fake quantization refuses float64: the CPU's result is the reference
        oracle = None
    base = {"check": "forward+backward", "samples": 1}
    recording = record_ops(ctx.device_type, into_subclasses=True)
    comparisons, failure = [], None
    with ctx.adapter.track_fallbacks() as fallbacks, recording as recorder:
        try:
            device_module = prepare(copy.deepcopy(target.module).to(ctx.device), target.group_size)
            got = _step(device_module, target, ctx.device, item.subject)
            ctx.adapter.synchronize()
            got = [t.cpu() for t in got]
            comparisons.append(("forward, gradients, step", compare(got, reference, oracle)))
        except Exception as exc:
            failure = exc
    return finish(item, comparisons, failure, recorder, None, fallbacks, base)


def _qat(module: torch.nn.Module, group_size: int) -> torch.nn.Module:
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.qat import QATConfig

    base = Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(group_size))
    quantize_(module, QATConfig(base, step="prepare"))
    return module


def _float8(module: torch.nn.Module, group_size: int) -> torch.nn.Module:
    from torchao.float8 import convert_to_float8_training

    return convert_to_float8_training(module)


def _step(module: torch.nn.Module, target: targets.Target, device: Any, subject: str, wide: bool = False) -> list:
    """Output, the input's and every parameter's gradient (float8 training: and the parameters
    after one AdamW step)."""
    module.train()
    x = target.inputs[0].detach().clone().to(torch.float64 if wide else target.inputs[0].dtype)
    x = x.to(device).requires_grad_(True)
    out = module(x)
    out.float().square().mean().backward() if not wide else out.square().mean().backward()
    found = [out.detach(), x.grad] + [p.grad for p in module.parameters()]
    if subject == "float8_training":
        torch.optim.AdamW(module.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY).step()
        found += [p.detach() for p in module.parameters()]
    return [t.detach() for t in found if t is not None]


def _optimizer(item: WorkItem, ctx: Any, target: targets.Target) -> Result:
    import torchao.optim

    cls = getattr(torchao.optim, OPTIMIZERS[item.subject])
    module = target.module
    torch.manual_seed(ctx.config.seed)
    grads = [torch.randn(p.shape).to(p.dtype) for p in module.parameters()]
    eager = item.mode == "eager"
    try:
        reference, cpu_state = _optimizer_step(cls, module, grads, "cpu", eager)
    except Exception as exc:
        return result_for(item, cpu_refusal(item.subject, exc))
    wide = [p.detach().to(torch.float64).clone().requires_grad_(True) for p in module.parameters()]
    for p, g in zip(wide, grads):
        p.grad = g.to(torch.float64)
    torch.optim.AdamW(wide, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY).step()
    base = {"check": "optimizer-step", "samples": 1 + len(cpu_state)}
    comparisons, failure = [], None
    with ctx.adapter.track_fallbacks() as fallbacks, record_ops(ctx.device_type, into_subclasses=True) as recorder:
        try:
            got, state = _optimizer_step(cls, module, grads, ctx.device, eager)
            ctx.adapter.synchronize()
            comparisons.append(("parameters after the step", compare([t.cpu() for t in got], reference,
                                                                     [p.detach() for p in wide])))
            for name, value in cpu_state.items():
                comparisons.extend(compare_inner(f"state {name}", value, state[name]))
        except Exception as exc:
            failure = exc
    if not cpu_state and failure is None:
        return result_for(item, NotApplicable(f"{cls.__name__} kept no quantized state for {item.variant}"))
    return finish(item, comparisons, failure, recorder, None, fallbacks, base)


def _optimizer_step(cls: type, module: torch.nn.Module, grads: list, device: Any, eager: bool):
    params = [p.detach().clone().to(device).requires_grad_(True) for p in module.parameters()]
    for p, g in zip(params, grads):
        p.grad = g.to(device)
    optimizer = cls(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    with _uncompiled() if eager else contextlib.nullcontext():
        optimizer.step()
    state = {f"{index}.{key}": value for index, p in enumerate(params)
             for key, value in optimizer.state[p].items()
             if isinstance(value, torch.Tensor) and hasattr(value, "__tensor_flatten__")
             and type(value) is not torch.Tensor}
    return [p.detach() for p in params], state


@contextlib.contextmanager
def _uncompiled():
    """torch.compile as the identity while torchao's optimizer builds its step (eager mode)."""
    saved = torch.compile
    torch.compile = lambda fn=None, **kwargs: fn if fn is not None else (lambda f: f)
    try:
        yield
    finally:
        torch.compile = saved
