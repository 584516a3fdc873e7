"""Token labels that the model's own loss head accepts.

A language-model head takes labels shaped like the sequence it predicts. That is usually its
`input_ids` (causal LMs) or its `decoder_input_ids` (encoder-decoders), but the task table a type
is listed under does not always say which one: an audio-language model listed as seq2seq-LM
predicts its input text; an image-to-text model listed under image-text-to-text predicts its
decoder text. A few heads predict another layout altogether: Perceiver's masked-LM decoder
answers a fixed number of positions, and MusicGen wants `(batch, sequence, codebooks)` where
its logits are `(batch, codebooks, sequence, vocabulary)`.

So the layout is measured, like the image tokens of a vision-language model: the candidates
are tried, most conventional first, with one no-grad CPU forward each, and the first one whose
loss the model computes is kept. A model that accepts none keeps the conventional choice, and
its CPU reference then fails with the model's own message.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Iterator
from typing import Any

from conformance.models.passes import forward_kwargs

TOKEN_INPUTS = ("input_ids", "decoder_input_ids")


def fit_labels(model: Any, inputs: dict[str, Any], labels: Any, seed: int) -> dict[str, Any]:
    """`inputs` with the first label layout (and, where the loss needs it, the image) that the
    model's loss head accepts, trying `labels`, the conventional choice, first."""
    for candidate in _candidates(model, inputs, labels, seed):
        if _gives_loss(model, candidate):
            return candidate
    return {**inputs, "labels": labels}


def _candidates(model: Any, inputs: dict[str, Any], labels: Any, seed: int) -> Iterator[dict[str, Any]]:
    """Label layouts, most conventional first: the given labels; each token input the model
    reads; random tokens over each arrangement of its logits' leading dimensions. Then the same
    again with an image added, where the forward takes one and none was given (GIT computes its
    loss after the image tokens it assumes are there)."""
    yield from _layouts(model, inputs, labels, seed)
    params = inspect.signature(model.forward).parameters
    if "pixel_values" in params and "pixel_values" not in inputs:
        from conformance.models.vision_features import pixel_values

        yield from _layouts(model, {**inputs, "pixel_values": pixel_values(model.config, seed)}, labels, seed)


def _layouts(model: Any, inputs: dict[str, Any], labels: Any, seed: int) -> Iterator[dict[str, Any]]:
    import torch

    from conformance.models.tokens import _generator

    tried: set[tuple[int, ...]] = set()
    for choice in (labels, *(inputs[k] for k in TOKEN_INPUTS if k in inputs)):
        if tuple(choice.shape) not in tried:
            tried.add(tuple(choice.shape))
            yield {**inputs, "labels": choice if choice is labels else choice.clone()}
    logits = _logits(model, inputs)
    if logits is None or logits.ndim < 2:
        return
    *leading, vocab = logits.shape
    sequence = inputs["input_ids"].shape[-1] if "input_ids" in inputs else None
    for batch, *rest in _batch_first(leading):
        # the batch stays first; the sequence second, as Transformers' heads read labels[:, t]
        # as token t (MusicGen's (batch, sequence, codebooks)), then any other arrangement
        orders = sorted(itertools.permutations(rest), key=lambda order: order[:1] != (sequence,))
        for order in orders:
            shape = (batch, *order)
            if shape not in tried:
                tried.add(shape)
                yield {**inputs, "labels": torch.randint(0, vocab, shape, generator=_generator(seed + 5))}


def _batch_first(leading: list[int]) -> list[tuple[int, ...]]:
    """The logits' leading dimensions as they are, and, where the first one holds several rows
    per sample (MusicGen returns `(batch * codebooks, sequence)`), split into (batch, rows)."""
    from conformance.models.tokens import BATCH

    layouts = [tuple(leading)]
    if leading[0] > BATCH and leading[0] % BATCH == 0:
        layouts.append((BATCH, leading[0] // BATCH, *leading[1:]))
    return layouts


def _logits(model: Any, inputs: dict[str, Any]):
    """The logits of one no-grad CPU forward without labels, or None (no logits, or it raises)."""
    import torch

    try:
        with torch.no_grad():
            logits = getattr(model(**forward_kwargs(model, inputs)), "logits", None)
    except Exception:  # noqa: BLE001 - then there is no layout to measure
        return None
    return logits if isinstance(logits, torch.Tensor) and logits.is_floating_point() else None


def _gives_loss(model: Any, inputs: dict[str, Any]) -> bool:
    import torch

    try:
        with torch.no_grad():
            loss = getattr(model(**forward_kwargs(model, inputs)), "loss", None)
    except Exception:  # noqa: BLE001 - a layout the head refuses
        return False
    return isinstance(loss, torch.Tensor)

