"""Inputs for heads that wrap a whole vision-language model (the ColVision retrievers: ColPali,
ColQwen2, ColModernVBert keep theirs as `self.vlm`, with its config as `vlm_config`): the wrapped
model's own image-text inputs, made as for that model, which the head hands on to it."""

from __future__ import annotations

import inspect
from typing import Any


def wrapped_vlm(model: Any) -> Any | None:
    """The vision-language model `model` wraps (its base model, when that one makes image features
    and the head itself does not), or None."""
    from conformance.models.vision_features import image_encoder

    inner = getattr(model, "base_model", model)
    if inner is model or not hasattr(inner, "forward") or image_encoder(model) is not None:
        return None
    return inner if image_encoder(inner) is not None else None


def wrapped_inputs(model: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """The inner model's image-text `inputs`, as the wrapping head's forward takes them."""
    params = inspect.signature(model.forward).parameters
    pixels, grid = inputs.get("pixel_values"), inputs.get("image_grid_thw")
    if "image_grid_thw" in params and grid is not None and pixels is not None and pixels.dim() == 2:
        # a head that embeds the images itself takes the processor's per-image padded patch rows
        # (batch, rows, patch) and unpads them by the grid
        inputs["pixel_values"] = pixels.reshape(grid.shape[0], -1, pixels.shape[-1])
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return inputs
    return {k: v for k, v in inputs.items() if k in params}
