"""Inputs of draft models (speculative-decoding assistants) that read what their target model
computed instead of tokens: the target's K/V per attention kind (`shared_kv_states`) and its
last hidden states joined with the token embeddings (`inputs_embeds`).

No target model is built: the K/V are random tensors shaped as each attention layer that reuses
them expects (its kind, key heads and head width), and the embeddings are offered at each width
the draft head's own projections take, the first its forward accepts kept.
"""

from __future__ import annotations

from typing import Any

from conformance.models.tokens import BATCH, SEQ_LEN, _generator


def _kv_readers(model: Any) -> dict[str, tuple[int, int]]:
    """(key heads, head width) per attention kind, from the layers that reuse another's K/V."""
    found: dict[str, tuple[int, int]] = {}
    for module in model.modules():
        kind, width, groups = (getattr(module, name, None) for name in ("layer_type", "head_dim", "num_key_value_groups"))
        heads = getattr(getattr(module, "config", None), "num_attention_heads", None)
        if getattr(module, "is_kv_shared_layer", False) and isinstance(kind, str) and all(
                isinstance(v, int) and v > 0 for v in (width, groups, heads)):
            found.setdefault(kind, (heads // groups, width))
    return found


def _embedding_widths(model: Any) -> list[int]:
    """The input widths of the head's own linear layers (a draft head projects what it is given)."""
    import torch

    widths = [m.in_features for m in model.children() if isinstance(m, torch.nn.Linear)]
    return sorted(set(widths), key=widths.index)


def draft_inputs(model: Any, params: dict[str, Any], seed: int) -> dict[str, Any]:
    """`shared_kv_states` and `inputs_embeds` for a draft model's forward; {} for any other."""
    import torch

    if "shared_kv_states" not in params or "inputs_embeds" not in params:
        return {}
    readers = _kv_readers(model)
    if not readers:
        return {}
    generator = _generator(seed + 11)
    states = {kind: tuple(torch.randn((BATCH, heads, SEQ_LEN, width), generator=generator) for _ in "kv")
              for kind, (heads, width) in readers.items()}
    offered = [{"inputs_embeds": torch.randn((BATCH, SEQ_LEN, width), generator=_generator(seed + 12)),
                "shared_kv_states": states} for width in _embedding_widths(model)]
    for inputs in offered:
        try:
            with torch.no_grad():
                model(**inputs)
        except Exception:  # noqa: BLE001 - not this width
            continue
        return inputs
    return offered[0] if offered else {}  # none fits: the forward's own error says why
