"""Inputs of vision-language-action policies (PI0, PI0.5): a prompt with each camera's image
tokens, camera images with a mask of the cameras present, and for the action expert the robot
state and a chunk of noisy actions at a flow-matching timestep, each sized by the policy's config
(`max_state_dim`, `chunk_size`, `max_action_dim`). Their forwards document none of these shapes.
"""

from __future__ import annotations

import inspect
from typing import Any

from conformance.models.tokens import BATCH, SEQ_LEN, _generator, token_ids

CAMERAS = 1
TIMESTEP = 0.5  # fixed: the forward draws one from a Beta distribution when none is given
# Config fields that size an action chunk: a policy's config names both.
CHUNK_FIELDS = ("chunk_size", "max_action_dim")


def takes_policy_inputs(model: Any) -> bool:
    """A policy: its config sizes an action chunk and its forward reads a per-camera mask."""
    params = inspect.signature(model.forward).parameters
    return all(_size(model.config, key) for key in CHUNK_FIELDS) and "pixel_attention_mask" in params


def _size(config: Any, key: str) -> int | None:
    value = getattr(config, key, None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _vision_language_part(model: Any) -> Any:
    """The (sub)module that makes image features and embeds the prompt: the policy's VLM."""
    return next(m for m in model.modules() if m is not model and hasattr(m, "get_image_features"))


def policy_inputs(model: Any, seed: int, labels: bool = False) -> dict[str, Any]:
    import torch

    from conformance.models.vision_features import feature_rows, image_token_id, pixel_values, with_image_tokens

    config, params = model.config, inspect.signature(model.forward).parameters
    vlm = _vision_language_part(model)
    images = pixel_values(vlm.config, seed, BATCH * CAMERAS)
    per_image = feature_rows(vlm, {"pixel_values": images}, BATCH * CAMERAS)
    ids = token_ids(vlm.config, (BATCH, SEQ_LEN), seed)
    token = image_token_id(vlm.config)
    if per_image and token is not None:
        ids = with_image_tokens(ids, token, per_image * CAMERAS)
    inputs: dict[str, Any] = {
        "input_ids": ids, "attention_mask": torch.ones_like(ids),
        "pixel_values": images.reshape(BATCH, CAMERAS, *images.shape[1:]),
        "pixel_attention_mask": torch.ones((BATCH, CAMERAS), dtype=torch.bool)}
    chunk, action_dim = _size(config, "chunk_size"), _size(config, "max_action_dim")
    noise = torch.randn((BATCH, chunk, action_dim), generator=_generator(seed + 4))
    if "state" in params:
        state_dim = _size(config, "max_state_dim") or action_dim
        inputs["state"] = torch.randn((BATCH, state_dim), generator=_generator(seed + 5))
    if "noise" in params:
        inputs["noise"] = noise
    if "timestep" in params:
        inputs["timestep"] = torch.full((BATCH,), TIMESTEP)
    if "action_embeds" in params:  # the bare model takes the action expert's input already embedded
        inputs["action_embeds"] = torch.randn((BATCH, chunk, _expert_width(config)), generator=_generator(seed + 6))
    if labels and "actions" in params:
        inputs["actions"] = torch.randn(noise.shape, generator=_generator(seed + 7))
    return inputs


def _expert_width(config: Any) -> int:
    """The action expert's width: the hidden size of the sub-config that is not the VLM."""
    experts = [getattr(config, key) for key in getattr(config, "sub_configs", {}) or {}
               if not hasattr(getattr(config, key, None), "vision_config")]
    return next(c.hidden_size for c in experts if _size(c, "hidden_size"))
