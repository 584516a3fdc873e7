"""Where a vision-language model's image features go in its text, for models that are told by a
mask rather than by placeholder token ids:

* Kosmos-2 overwrites the embeddings at `image_embeds_position_mask` with its latent queries, so
  the text gets as many slots as the image makes features (measured, like placeholder tokens);
* IDEFICS cross-attends from every text token to the images `image_attention_mask` allows, over
  images given per sample as (batch, images, C, H, W).
"""

from __future__ import annotations

import inspect
from typing import Any


def slot_inputs(model: Any, ids: Any, images: dict[str, Any], count: int | None) -> dict[str, Any]:
    """Updates to the inputs (ids, masks, pixels) for a model told where images go by a mask;
    {} for any other model."""
    import torch

    params = inspect.signature(model.forward).parameters
    if "image_embeds_position_mask" in params and count:
        slots = torch.full((ids.shape[0], count), int(ids[0, 0]), dtype=ids.dtype)
        spliced = torch.cat([ids[:, :1], slots, ids[:, 1:]], dim=1)
        mask = torch.zeros_like(spliced)
        mask[:, 1:1 + count] = 1
        return {"input_ids": spliced, "attention_mask": torch.ones_like(spliced), "image_embeds_position_mask": mask}
    if "image_attention_mask" in params and takes_image_slots(model) and isinstance(images.get("pixel_values"), torch.Tensor):
        pixels = images["pixel_values"]
        pixels = pixels.unsqueeze(1) if pixels.dim() == 4 else pixels
        return {"pixel_values": pixels,
                "image_attention_mask": torch.ones((ids.shape[0], ids.shape[1], pixels.shape[1]), dtype=torch.long)}
    return {}


SLOT_MASKS = ("image_embeds_position_mask", "image_attention_mask")


def takes_image_slots(model: Any) -> bool:
    """Whether the model is told where its images go by one of SLOT_MASKS."""
    from conformance.models.documented import documented_tensors

    params = inspect.signature(model.forward).parameters
    documented = documented_tensors(model.forward, frozenset())
    # a mask documented over image patches (FLAVA's) hides patches; it places no image in the text
    return "pixel_values" in params and any(
        name in params and not any("patches" in d for d in getattr(documented.get(name), "dims", ()))
        for name in SLOT_MASKS)
