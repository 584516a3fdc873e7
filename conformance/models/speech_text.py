"""Inputs of models that read audio together with text.

* A forward that takes both audio and (optional) token ids is offered the audio alone first
  (speech recognizers decode their own text); one that rejects it reads both (CLVP and CLAP
  embed the text beside the speech, MusicGen conditions on a text prompt, Voxtral Realtime
  transcribes into a text stream), so it gets the text too.
* The other outputs of the type's feature extractor that the forward takes by name (CLAP's
  `is_longer`, which says which clips were fused from several crops) go with its features.
* An audio-language head's audio features are made by its own `get_audio_features` or, where
  it has none (VibeVoice), by the model it wraps; a head's method that only passes its
  arguments through to the wrapped model's accepts what that one does.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from conformance.models.tokens import feature_owner

# Extractor outputs never passed as companions: each has a rule of its own (a text mask, the
# audio masks of modalities.py) or is the main input itself.
NOT_COMPANIONS = frozenset({"attention_mask", "input_features", "input_values", "input_features_mask",
                            "feature_attention_mask"})


def with_text_if_needed(model: Any, inputs: dict[str, Any], text: Callable[[], Any]) -> dict[str, Any]:
    """`inputs` (audio, no token ids) when the forward runs on them, else `inputs` with the token
    ids `text()` makes (and their mask) when it runs on those; else `inputs` unchanged."""
    import torch

    from conformance.models.patches import accepted

    if accepted(model, inputs):
        return inputs
    ids = text()
    with_text = {**inputs, "input_ids": ids}
    if "attention_mask" in inspect.signature(model.forward).parameters:
        with_text["attention_mask"] = torch.ones_like(ids)
    return with_text if accepted(model, with_text) else inputs


def extractor_companions(features: Any, params: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """The feature extractor's outputs (`features`, a mapping or None) beside the features that
    the forward takes (`params`) and that no other rule has built (`inputs`)."""
    if features is None:
        return {}
    return {key: value for key, value in features.items()
            if key in params and key not in inputs and key not in NOT_COMPANIONS}


def passes_through(method: Any) -> bool:
    """Whether `method` takes only `*args, **kwargs` (it forwards them to another method)."""
    kinds = {p.kind for p in inspect.signature(method).parameters.values()}
    return bool(kinds) and kinds <= {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}


def audio_encoder(model: Any) -> Any | None:
    """What makes the model's audio features: the head itself, or the model it wraps when only
    that one has `get_audio_features` (VibeVoice); None for a model without one."""
    return feature_owner(model, ("get_audio_features",))


def audio_feature_params(model: Any) -> set[str]:
    """The parameters `model.get_audio_features` accepts, through a pass-through to the wrapped
    model's `get_audio_features` (Voxtral's and OmniASR's heads)."""
    method = model.get_audio_features
    inner = getattr(getattr(model, "model", None), "get_audio_features", None)
    if passes_through(method) and inner is not None:
        method = inner
    return set(inspect.signature(method).parameters)
