"""Compile mode of a model item: the device model compiled under a CompileWatch.

forward and backward compile the module (its forward and, through AOTAutograd, its backward);
generate compiles the forward and decodes with a static cache, the set-up meant to compile
once, so the watch's recompiles over the decode steps are the number worth reporting.
With --dynamic the batch dimension of every input is marked dynamic and the forward runs a
second time at twice the batch: a model that allows it records no recompile there.
"""

from __future__ import annotations

from typing import Any, Callable

from conformance.compiling.watch import CompileWatch

BATCH_DIM = 0


class CompiledModel:
    """A compiled module that still exposes the module's parameters, config and signature."""

    def __init__(self, module, compiled):
        self._module, self._compiled = module, compiled
        self.forward = module.forward

    def __call__(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._module, name)


def compile_model(model, ctx, variant: str) -> tuple[CompileWatch, Any]:
    """The item's watch and what the variant runs: the compiled module, or (generate) the
    module with its forward compiled."""
    import torch._dynamo as dynamo

    dynamo.reset()
    watch = CompileWatch(ctx.compile_backend, ctx.config.compile)
    if variant == "generate":
        model.forward = watch.compile(model.forward)
        return watch, model
    compiled = CompiledModel(model, watch.compile(model))
    if type(model).__module__.startswith("diffusers."):
        # a Diffusers autoencoder is checked through encode and decode, not forward: compile those
        for name in ("encode", "decode"):
            if callable(getattr(model, name, None)):
                setattr(compiled, name, watch.compile(getattr(model, name)))
    return watch, compiled


def mark_batch_dynamic(inputs: dict[str, Any]) -> None:
    import torch

    for value in inputs.values():
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[BATCH_DIM] > 1:
            torch._dynamo.mark_dynamic(value, BATCH_DIM)


def doubled_batch(inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs at twice the batch size (every batched tensor repeated along dim 0)."""
    import torch

    batch = next((v.shape[BATCH_DIM] for v in inputs.values() if isinstance(v, torch.Tensor) and v.dim() > 0), None)
    doubled = {}
    for key, value in inputs.items():
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[BATCH_DIM] == batch:
            doubled[key] = torch.cat([value, value], dim=BATCH_DIM)
        else:
            doubled[key] = value
    return doubled


def second_shape_recompiles(watch: CompileWatch, run: Callable, model, inputs: dict[str, Any]) -> int:
    """Run the variant again at twice the batch; how many recompiles that caused."""
    before = watch.facts().recompiles
    run(model, doubled_batch(inputs))
    return watch.facts().recompiles - before
