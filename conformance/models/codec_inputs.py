"""Inputs of audio codec halves whose forward takes bare `hidden_states` (VibeVoice's acoustic
tokenizer): the encoder reads a waveform, (batch, channels, samples), long enough for its
downsampling ratios to leave a few frames; the decoder reads latents, (batch, hidden_size,
frames). Which half a model is, is found by trying the waveform first.
"""

from __future__ import annotations

import inspect
import math
from typing import Any
from conformance.models.tokens import BATCH

FRAMES = 2


def codec_inputs(model: Any, params: dict[str, inspect.Parameter], seed: int) -> dict[str, Any]:
    """{"hidden_states": ...} for a codec half (a config with `downsampling_ratios`), else {}."""
    import torch

    from conformance.models.patches import accepted
    from conformance.models.tokens import _generator

    config = model.config
    ratios = getattr(config, "downsampling_ratios", None)
    if "hidden_states" not in params or not isinstance(ratios, (list, tuple)) or not ratios:
        return {}
    channels = int(getattr(config, "channels", 1) or 1)
    waveform = torch.randn((BATCH, channels, FRAMES * math.prod(ratios)), generator=_generator(seed + 1))
    latents = torch.randn((BATCH, int(config.hidden_size), FRAMES), generator=_generator(seed + 1))
    candidates = [{"hidden_states": waveform}, {"hidden_states": latents}]
    return next((c for c in candidates if accepted(model, c)), candidates[0])
