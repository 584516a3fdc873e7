"""Deterministic inputs for a tiny model, by task.

Inputs are made on CPU from a private generator, so the same (model, seed)
always gets the same tensors, and the global RNG is left alone. Token ids
avoid the special tokens of the config (they may trigger model-specific
paths such as image-token substitution).
"""

from __future__ import annotations

from typing import Any

BATCH = 2
SEQ_LEN = 8
DECODER_LEN = 6
NUM_LABELS = 2


def _generator(seed: int):
    import torch

    return torch.Generator().manual_seed(seed)


def _all_token_ids(config: Any) -> set[int]:
    found: set[int] = set()
    configs = [config] + [getattr(config, k, None) for k in getattr(config, "sub_configs", {}) or {}]
    for cfg in configs:
        if cfg is None:
            continue
        for key, value in cfg.to_dict().items():
            if key.endswith(("_token_id", "_token_index", "_token_ids")):
                for v in value if isinstance(value, list) else [value]:
                    if isinstance(v, int) and not isinstance(v, bool):
                        found.add(v)
    return found


def text_config(config: Any) -> Any:
    return getattr(config, "text_config", None) or getattr(config, "decoder", None) or config


def vocab_size(config: Any) -> int:
    size = getattr(text_config(config), "vocab_size", None) or getattr(config, "vocab_size", None)
    return int(size or 32)


def token_ids(config: Any, shape: tuple[int, ...], seed: int):
    """Random ids below the vocabulary size that are not special tokens."""
    import torch

    vocab = vocab_size(config)
    allowed = torch.tensor([i for i in range(vocab) if i not in _all_token_ids(config)] or [vocab - 1])
    picks = torch.randint(0, len(allowed), shape, generator=_generator(seed))
    return allowed[picks]


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


def make_inputs(task: str, config: Any, seed: int = 0, *, labels: bool = False) -> dict[str, Any]:
    """Keyword arguments for the model's forward; float tensors are float32 (cast later)."""
    import torch

    if task == "image-classification":
        inputs: dict[str, Any] = {"pixel_values": pixel_values(config, seed)}
        if labels:
            inputs["labels"] = torch.randint(0, NUM_LABELS, (BATCH,), generator=_generator(seed + 2))
        return inputs
    ids = token_ids(config, (BATCH, SEQ_LEN), seed)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if task == "seq2seq-lm":
        inputs["decoder_input_ids"] = token_ids(config, (BATCH, DECODER_LEN), seed + 3)
    if task == "image-text-to-text":
        inputs["pixel_values"] = pixel_values(config, seed)
    if labels:
        if task == "sequence-classification":
            inputs["labels"] = torch.randint(0, NUM_LABELS, (BATCH,), generator=_generator(seed + 2))
        elif task == "seq2seq-lm":
            inputs["labels"] = inputs["decoder_input_ids"].clone()
        else:
            inputs["labels"] = ids.clone()
    return inputs


def cast_inputs(inputs: dict[str, Any], device: Any = None, dtype: Any = None) -> dict[str, Any]:
    """Move tensors to `device`; floating tensors also take `dtype`."""
    import torch

    out = {}
    for key, value in inputs.items():
        if isinstance(value, torch.Tensor):
            value = value.to(device=device, dtype=dtype if value.is_floating_point() and dtype else value.dtype)
        out[key] = value
    return out
