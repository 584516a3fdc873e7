"""What a vision-language model's image side needs, measured on the model itself: pixel values at
the config's image size, its placeholder token ids, the module that makes its visual features and
how many text-wide rows those features have per image. The input builders (inputs.py and the
special builders it calls: policies, sessions, wrapped models) share these."""

from __future__ import annotations

from typing import Any

from conformance.models.tokens import BATCH, _generator, feature_owner, text_config


def image_size(config: Any) -> tuple[int, int, int]:
    vision = getattr(config, "vision_config", None) or config
    size = getattr(vision, "image_size", None) or 32
    if isinstance(size, (list, tuple)):
        height, width = int(size[0]), int(size[-1])
    elif isinstance(size, dict):
        height, width = int(size.get("height", 32)), int(size.get("width", 32))
    else:
        height = width = int(size)
    return int(getattr(vision, "num_channels", 3) or 3), height, width


def pixel_values(config: Any, seed: int, batch: int = BATCH):
    import torch

    channels, height, width = image_size(config)
    return torch.randn((batch, channels, height, width), generator=_generator(seed + 1))


# (a video-only model's frames take the video placeholder: InstructBLIP-Video)
IMAGE_TOKEN_KEYS = ("image_token_id", "image_token_index", "video_token_id", "video_token_index")


def image_token_id(config: Any, keys: tuple[str, ...] = IMAGE_TOKEN_KEYS) -> int | None:
    for cfg in (config, text_config(config)):
        for key in keys:
            value = getattr(cfg, key, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def image_encoder(model: Any) -> Any | None:
    """What makes the model's image features: the head itself, or the model it wraps when only
    that one has `get_image_features` (DeepSeek-VL, Janus); None for a model without one."""
    from conformance.models.modalities import without_vision

    return None if without_vision(model.config) else feature_owner(model, FEATURE_METHODS)


# What makes a vision-language model's visual features: images, else video frames.
FEATURE_METHODS = ("get_image_features", "get_video_features")


def feature_method(encoder: Any) -> str:
    return next(method for method in FEATURE_METHODS if hasattr(encoder, method))


def feature_rows(model: Any, image_inputs: dict[str, Any], batch: int, method: str = "get_image_features") -> int | None:
    """Rows of text-width features per image (or per clip) that `method` makes, or None."""
    import torch

    try:
        with torch.no_grad():
            found = getattr(model, method)(**image_inputs)
    except Exception:  # noqa: BLE001 - not this layout
        return None
    hidden, deep = getattr(found, "last_hidden_state", None), getattr(found, "deepstack_features", None)
    found = getattr(found, "pooler_output", found)
    if found is None and deep:  # features only per text layer, (layer, per-image tensors) (Granite 4 Vision)
        found = deep[0][1]
    width = getattr(text_config(model.config), "hidden_size", None)
    if found is None and isinstance(hidden, torch.Tensor) and hidden.shape[-1] == width:
        found = hidden  # features already text-wide with no pooling (Fuyu's patch embeddings)
    if isinstance(found, torch.Tensor):
        found = [found]
    if not isinstance(found, (list, tuple)) or not found or not all(isinstance(f, torch.Tensor) for f in found):
        return None
    rows = sum(f.numel() for f in found) // found[0].shape[-1]
    return rows // batch if rows and rows % batch == 0 else None


def with_image_tokens(ids: Any, token: int, count: int, bounds: tuple[int, ...] = ()):
    """`count` image placeholders after the first text token of every row, between the `bounds`
    (start, end) tokens when given."""
    import torch

    row = [bounds[0]] + [token] * count + [bounds[1]] if bounds else [token] * count
    placeholders = torch.tensor([row] * ids.shape[0], dtype=ids.dtype)
    return torch.cat([ids[:, :1], placeholders, ids[:, 1:]], dim=1)


def image_bounds(config: Any) -> tuple[int, ...]:
    """The (start, end) token ids a model's code counts around each image's placeholders (Ovis 2.5
    checks one pair per image), or () when its config names no such pair."""
    start = image_token_id(config, ("image_start_token_id",))
    end = image_token_id(config, ("image_end_token_id",))
    return (start, end) if start is not None and end is not None else ()
