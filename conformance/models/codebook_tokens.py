"""Token inputs of audio-token models whose ids carry a codebook axis.

MusicGen documents its codebooks as stacked rows (`batch_size * num_codebooks`, documented.py);
others read one id per codebook at each position, a layout their docstrings do not give or give
beside the plain one: CSM (batch, length, codebooks), Dia's decoder (batch, length, channels),
Kyutai (batch, length, 1 + codebooks: the text token, then the audio codebooks). A forward that
rejects its plain (batch, length) ids is offered each codebook layout, one token input at a
time, and the first it runs on is kept.
"""

from __future__ import annotations

from typing import Any

# Config fields that count a model's codebooks; `num_channels` counts them only in a config of a
# token model (one with a vocabulary: Dia's decoder), elsewhere it is an image's channels.
CODEBOOK_KEYS = ("num_codebooks", "num_channels")
TOKEN_INPUTS = ("input_ids", "decoder_input_ids")


def codebook_count(config: Any) -> int | None:
    """How many codebooks the config (or one of its sub-configs) counts, or None."""
    parts = [config, *(getattr(config, key, None) for key in getattr(config, "sub_configs", None) or {})]
    for key in CODEBOOK_KEYS:
        for part in parts:
            value = getattr(part, key, None) if part is not None else None
            if key == "num_channels" and not isinstance(getattr(part, "vocab_size", None), int):
                continue
            if isinstance(value, int) and not isinstance(value, bool) and value > 1:
                return value
    return None


def codebook_layouts(inputs: dict[str, Any], codebooks: int) -> list[dict[str, Any]]:
    """`inputs` with one (batch, length) token input made (batch, length, k), k the codebook
    count and then one more (a text stream beside them), each id repeated across its codebooks."""
    candidates = []
    for key in TOKEN_INPUTS:
        ids = inputs.get(key)
        if ids is None or ids.dim() != 2:
            continue
        for width in (codebooks, codebooks + 1):
            candidates.append({**inputs, key: ids.unsqueeze(-1).repeat(1, 1, width)})
    return candidates


def with_codebook_layout(model: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """`inputs` when the forward runs on them or the model counts no codebooks; else the first
    codebook layout it runs on (`inputs` unchanged when none runs)."""
    from conformance.models.patches import accepted

    codebooks = codebook_count(model.config)
    if codebooks is None or accepted(model, inputs):
        return inputs
    return next((c for c in codebook_layouts(inputs, codebooks) if accepted(model, c)), inputs)
