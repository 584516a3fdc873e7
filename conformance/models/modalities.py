"""Inputs for the task tables beyond text generation, built from the model's forward signature
and its own config: token ids and masks, layout boxes, pixel values at the config's image size,
video frames, raw waveforms or audio features (through the type's own feature extractor, built
from its defaults, nothing downloaded), time series.

Each rule below fills one forward parameter; a forward whose main input no rule knows raises
MissingInputBuilder (the census cause "input builder missing").
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

BATCH = 2
SEQ_LEN = 8
CHOICES = 2
WAVEFORM_SECONDS = 0.5  # x-vector heads' dilated convolutions need about 15 frames
# Forward parameters any of which is the main input of a model.
MAIN_INPUTS = ("input_ids", "pixel_values", "input_values", "input_features", "past_values", "pixel_values_videos")


class MissingInputBuilder(Exception):
    """No rule builds this forward's main input."""


def _generator(seed: int):
    import torch

    return torch.Generator().manual_seed(seed)


def _get(config: Any, *names: str, default: Any = None) -> Any:
    """The first of `names` set on the config or one of its vision/audio/text sub-configs."""
    for cfg in (config, getattr(config, "vision_config", None), getattr(config, "audio_config", None),
                getattr(config, "text_config", None), getattr(config, "encoder_config", None)):
        for name in names:
            value = getattr(cfg, name, None) if cfg is not None else None
            if value is not None:
                return value
    return default


def _side(value: Any) -> tuple[int, int]:
    if isinstance(value, (list, tuple)):
        return int(value[0]), int(value[-1])
    if isinstance(value, dict):
        return int(value.get("height", 32)), int(value.get("width", 32))
    return int(value), int(value)


def _tokens(config, model, seed, task):
    from conformance.models.tokens import token_ids

    shape = (BATCH, CHOICES, SEQ_LEN) if task == "multiple-choice" else (BATCH, SEQ_LEN)
    return token_ids(config, shape, seed)


def _pixels(config, model, seed, task):
    import torch

    channels = int(_get(config, "num_channels", "in_channels", default=3))
    height, width = _side(_get(config, "image_size", "img_size", default=32))
    shape = (BATCH, channels, height, width)
    if task == "video-classification" or "video" in type(model).__name__.lower():
        shape = (BATCH, int(_get(config, "num_frames", default=4)), channels, height, width)
    return torch.randn(shape, generator=_generator(seed + 1))


def _boxes(config, model, seed, task):
    """Layout boxes (x0, y0, x1, y1) in 0..1000 with x0 <= x1 and y0 <= y1."""
    import torch

    corners = torch.randint(0, 1000, (BATCH, SEQ_LEN, 2, 2), generator=_generator(seed + 4))
    low, high = corners.min(dim=2).values, corners.max(dim=2).values
    return torch.cat([low, high], dim=-1)


def _feature_extractor(model):
    """The type's own feature extractor with its default settings, or None."""
    import transformers
    from transformers.models.auto import feature_extraction_auto

    name = feature_extraction_auto.FEATURE_EXTRACTOR_MAPPING_NAMES.get(model.config.model_type)
    cls = getattr(transformers, name, None) if name else None
    return cls() if cls is not None else None


def _audio(key: str):
    def build(config, model, seed, task):
        import numpy as np
        import torch

        extractor = _feature_extractor(model)
        rate = int(getattr(extractor, "sampling_rate", 16000) or 16000)
        rng = np.random.default_rng(seed)
        waves = [rng.standard_normal(int(rate * WAVEFORM_SECONDS)).astype(np.float32) for _ in range(BATCH)]
        if extractor is None:
            if key == "input_values":
                return torch.from_numpy(np.stack(waves))
            raise MissingInputBuilder(f"{type(model).__name__} takes {key} but the type has no feature extractor")
        features = extractor(waves, sampling_rate=rate, return_tensors="pt")
        if key not in features:
            raise MissingInputBuilder(f"the feature extractor of {type(model).__name__} makes no {key}")
        return features[key].float()
    return build


def _series(key: str):
    def build(config, model, seed, task):
        import torch

        context = int(_get(config, "context_length", default=32))
        extra = max(_get(config, "lags_sequence", default=[0]) or [0])
        length = context + int(extra)
        channels = int(_get(config, "num_input_channels", "input_size", default=1))
        shape = (BATCH, length, channels) if channels > 1 or key != "past_time_features" else (BATCH, length)
        if key == "past_time_features":
            shape = (BATCH, length, int(_get(config, "num_time_features", default=1)))
        tensor = torch.randn(shape, generator=_generator(seed + 5))
        return torch.ones_like(tensor) if key == "past_observed_mask" else tensor
    return build


# Forward parameter -> builder(config, model, seed, task).
BUILDERS: dict[str, Callable[..., Any]] = {
    "input_ids": _tokens,
    "pixel_values": _pixels,
    "pixel_values_videos": _pixels,
    "bbox": _boxes,
    "input_values": _audio("input_values"),
    "input_features": _audio("input_features"),
    "past_values": _series("past_values"),
    "past_time_features": _series("past_time_features"),
    "past_observed_mask": _series("past_observed_mask"),
}


def _required(params: dict[str, inspect.Parameter]) -> set[str]:
    return {name for name, p in params.items() if p.default is inspect.Parameter.empty
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and name != "self"}


def signature_inputs(task: str, model: Any, seed: int) -> dict[str, Any]:
    """Keyword arguments for `model.forward`: every parameter a rule knows that the forward takes,
    an attention mask beside token ids, decoder ids for encoder-decoders."""
    import torch

    params = dict(inspect.signature(model.forward).parameters)
    if not any(name in params for name in MAIN_INPUTS):
        raise MissingInputBuilder(f"{type(model).__name__}.forward takes none of {', '.join(MAIN_INPUTS)}")
    config = model.config
    wanted = [name for name in BUILDERS if name in params]
    if "input_ids" in wanted and any(k in wanted for k in ("input_values", "input_features")) \
            and "input_ids" not in _required(params):
        wanted.remove("input_ids")  # speech models that also accept text take audio first
    inputs = {name: BUILDERS[name](config, model, seed, task) for name in wanted}
    if "input_ids" in inputs and "attention_mask" in params:
        inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    if "decoder_input_ids" in params and getattr(config, "is_encoder_decoder", False):
        from conformance.models.tokens import DECODER_LEN, token_ids

        inputs["decoder_input_ids"] = token_ids(config, (BATCH, DECODER_LEN), seed + 3)
    missing = _required(params) - set(inputs)
    if missing:
        raise MissingInputBuilder(f"{type(model).__name__}.forward requires {', '.join(sorted(missing))}")
    return inputs
