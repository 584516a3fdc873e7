"""The three passes a model item runs, the same on the CPU and the device: a forward, a
backward (the model's loss, or a fixed random projection where it has none) and greedy
generation. runner.py runs them under the item's dtype, seed and device."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from conformance.models.outputs import forward_outputs

NEW_TOKENS = 8


def forward_kwargs(model, inputs: dict[str, Any]) -> dict[str, Any]:
    """`inputs` as one plain forward takes them: without the cache where the model has one."""
    accepted = inspect.signature(model.forward).parameters
    kwargs = dict(inputs)
    if "use_cache" in accepted:
        kwargs["use_cache"] = False  # one plain forward; generate exercises the cache
    return kwargs


def run_forward(model, inputs):
    import torch

    with torch.no_grad():
        return forward_outputs(model(**forward_kwargs(model, inputs)))


SURROGATE_SEED = 1234
SURROGATE_NOTE = "no loss from the model (a base model, or no labels made for its head): gradients of a fixed random projection of its outputs"


def run_backward(model, inputs):
    """loss.backward() and every parameter gradient. A model without a loss head (a base model,
    a backbone) is differentiated through a fixed random projection of what its forward is
    judged on, the same on the CPU and the device (OpInfo's cotangents, in effect)."""
    model.zero_grad(set_to_none=True)
    out = model(**forward_kwargs(model, inputs))
    loss = getattr(out, "loss", None)
    surrogate = loss is None
    if surrogate:
        loss = surrogate_loss(forward_outputs(out))
    elif loss.ndim:  # one loss per sample or per term (DAC's): their sum, the same on CPU and device
        loss = loss.sum()
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    return {"loss": loss.detach(), "grads": grads, "surrogate": surrogate}


class NothingToDifferentiate(RuntimeError):
    """No loss head and no floating output that carries a gradient: a backward item has nothing
    to compare, on the CPU or any device."""

    def __init__(self):
        super().__init__("nothing to differentiate: the model has no loss head and its forward returns no floating "
                         "tensor that carries a gradient (integer codes only, or a forward run under "
                         "torch.inference_mode)")


def surrogate_loss(outputs):
    """sum(output * w) over the floating outputs, each w drawn on the CPU from a fixed seed (a
    plain sum would cancel to nothing after a normalisation)."""
    import torch
    from torch.utils import _pytree as pytree

    generator = torch.Generator().manual_seed(SURROGATE_SEED)
    terms = [(t.float() * torch.randn(t.shape, generator=generator).to(t.device)).sum()
             for t in pytree.tree_leaves(outputs) if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]
    if not terms:
        raise NothingToDifferentiate()
    return torch.stack(terms).sum()


def run_generate(model, inputs, static_cache: bool = False):
    """Greedy decoding; `static_cache` (compile mode): a fixed-size cache, so the compiled
    forward keeps one shape, and Transformers' own compile of it off (ours compiles it)."""
    import torch

    kwargs = {k: v for k, v in inputs.items() if k not in ("labels", "decoder_input_ids")}
    if static_cache:
        kwargs.update(cache_implementation="static", disable_compile=True)
    generation = model.generation_config
    if model.config.is_encoder_decoder and generation.decoder_start_token_id is None and generation.bos_token_id is None:
        # tiny configs built from defaults may name no start token; the pad id is the usual choice
        kwargs["decoder_start_token_id"] = getattr(model.config, "pad_token_id", None) or 0
    with torch.no_grad():
        return model.generate(**kwargs, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)


_VARIANTS: dict[str, Callable] = {"forward": run_forward, "backward": run_backward, "generate": run_generate}
