"""Random token ids for a tiny model: below its vocabulary size, never one of its special tokens
(they may trigger model-specific paths such as image-token substitution), from a private
generator so the global RNG is left alone."""

from __future__ import annotations

from typing import Any

# Every input builder's tiny sizes: samples per batch, tokens per sample, decoder tokens.
BATCH = 2
SEQ_LEN = 8
DECODER_LEN = 6


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
    special = _all_token_ids(config)  # once: it serialises every (sub-)config
    allowed = torch.tensor([i for i in range(vocab) if i not in special] or [vocab - 1])
    picks = torch.randint(0, len(allowed), shape, generator=_generator(seed))
    return allowed[picks]


def feature_owner(model: Any, methods: tuple[str, ...]) -> Any | None:
    """The head itself, or the model it wraps (`model.model`), whichever first has one of
    `methods` (tried in order); None for a model with none of them."""
    for method in methods:
        for owner in (model, getattr(model, "model", None)):
            if owner is not None and hasattr(owner, method):
                return owner
    return None


def config_value(config: Any, *names: str, default: Any = None) -> Any:
    """The first of `names` set on the config or one of its vision/audio/text sub-configs."""
    for cfg in (config, getattr(config, "vision_config", None), getattr(config, "audio_config", None),
                getattr(config, "text_config", None), getattr(config, "encoder_config", None)):
        for name in names:
            value = getattr(cfg, name, None) if cfg is not None else None
            if value is not None:
                return value
    return default
