"""Deterministic inputs for a tiny model, by task.

Inputs are made on CPU from a private generator, so the same (model, seed)
always gets the same tensors, and the global RNG is left alone. Token ids
come from tokens.py; the task tables beyond the first six build from the
forward signature (modalities.py).
"""

from __future__ import annotations

import inspect
from typing import Any

from conformance.models.tokens import BATCH, DECODER_LEN, SEQ_LEN, _generator, text_config, token_ids
from conformance.models.vision_features import (feature_method, feature_rows, image_bounds, image_encoder,
                                                image_token_id, pixel_values, with_image_tokens)

NUM_LABELS = 2

# The tasks built by the rules below; every other task builds from the forward signature.
LEGACY_TASKS = frozenset({"causal-lm", "seq2seq-lm", "masked-lm", "sequence-classification",
                          "image-classification", "image-text-to-text"})
AUDIO_TOKEN_KEYS = ("audio_token_id", "audio_token_index")
# The config key of a token a span-selection head finds its questions by (Splinter's recurring-span
# pretraining): every sample needs one, as every real question carries it.
QUESTION_TOKEN_KEYS = ("question_token_id",)


def _image_candidates(model: Any, config: Any, seed: int) -> list[dict[str, Any]]:
    """Image keyword arguments in the layouts vision-language models take, most common first:
    (B, C, H, W); with `image_sizes`; one image per sample as (B, 1, C, H, W); flattened patches
    with `image_grid_thw` (Qwen2-VL and its descendants)."""
    import torch

    pixels = pixel_values(config, seed)
    params = inspect.signature(model.forward).parameters
    candidates = [{"pixel_values": pixels}, {"pixel_values": pixels.unsqueeze(1)}]
    if "image_sizes" in params:  # any-resolution models: (B, patches, C, H, W) with each image's size
        sizes = torch.tensor([list(pixels.shape[-2:])] * pixels.shape[0])
        # each image tiled at its nearest grid pinpoint: a base view plus some tiles per image
        tiled = [{"pixel_values": pixels.unsqueeze(1).repeat(1, tiles, 1, 1, 1)} for tiles in (3, 5, 2)]
        candidates = [{**c, "image_sizes": sizes} for c in candidates + tiled] + candidates
    if "pixel_attention_mask" in params and "spatial_shapes" not in params:
        # one tile per image, marked real per tile (Granite Docling) or per pixel (Idefics3 kin)
        tiles = pixels.unsqueeze(1)
        candidates += [{"pixel_values": tiles, "pixel_attention_mask": torch.ones(tiles.shape[:2], dtype=torch.bool)},
                       {"pixel_values": tiles, "pixel_attention_mask": torch.ones(
                           (*tiles.shape[:2], *tiles.shape[-2:]), dtype=torch.bool)}]
    vision = getattr(config, "vision_config", None)
    if "target_sizes" in params and vision is not None:
        from conformance.models.patches import packed_strip

        candidates.append(packed_strip(vision, seed, pixels.shape[0]))
    if "image_position_ids" in params and vision is not None:
        from conformance.models.patches import positioned_patches

        rows, positions = positioned_patches(vision, seed, pixels.shape[0])
        candidates.append({"pixel_values": rows, "image_position_ids": positions})
    if "spatial_shapes" in params and vision is not None:
        from conformance.models.patches import naflex_patches

        candidates.append(naflex_patches(vision, seed, pixels.shape[0], with_mask="pixel_attention_mask" in params))
    if "image_grid_thw" in params and vision is not None:
        from conformance.models.patches import merge_sizes, patch_layouts

        # per-image merge windows (VideoLLaMA 3), named by the head or by the model it wraps
        encoder = image_encoder(model)
        named = {*inspect.signature(getattr(encoder, feature_method(encoder))).parameters, *params}
        extra = {name: merge_sizes(vision, pixels.shape[0]) for name in named
                 if name.endswith("merge_sizes") and not name.startswith("video")}
        candidates += [{"pixel_values": patches, "image_grid_thw": grid, **extra}
                       for patches, grid in patch_layouts(vision, seed, pixels.shape[0])]
    if "image_token_pooling" in params and vision is not None:
        from conformance.models.patches import pooled_crops

        candidates.append(pooled_crops(vision, seed, pixels.shape[0]))
    if "image_grid_hw" in params and vision is not None:  # the same grid without its time (Nemotron-H Omni)
        from conformance.models.patches import patch_layouts

        candidates += [{"pixel_values": patches, "image_grid_hw": grid[:, 1:]}
                       for patches, grid in patch_layouts(vision, seed, pixels.shape[0])]
    from conformance.models.patches import TEMPORAL_KEYS, naflex_patches

    # last, each image as a sequence of patch rows (Fuyu, whose decoder embeds patches directly)
    candidates.append({"pixel_values": naflex_patches(vision or config, seed, pixels.shape[0])["pixel_values"]})
    if vision is not None and "image_grid_thw" not in params and any(
            getattr(vision, key, None) for key in TEMPORAL_KEYS):
        from conformance.models.patches import tubelets

        candidates += [{"pixel_values": t} for t in tubelets(vision, seed, pixels.shape[0])]
    from conformance.models.modalities import image_companions

    companions = image_companions(model, seed)
    return [{**c, **companions} for c in candidates]


def image_inputs(model: Any, config: Any, seed: int) -> tuple[dict[str, Any], int | None]:
    """(image keyword arguments, placeholder tokens per image) for a vision-language model: the
    first layout its own `get_image_features` accepts, and how many feature rows it made (the
    count depends on patching, merging, CLS cropping and pooling, so it is measured, not derived)."""
    if "images_per_sample" in inspect.signature(model.forward).parameters:
        from conformance.models.documented import MissingInputBuilder

        raise MissingInputBuilder(
            f"{type(model).__name__} counts each sample's images with `images_per_sample`, the grid of an image to "
            f"generate among them, and splices VQ codes, not features, into its text: no rule builds that "
            f"layout yet (a gap of this suite, not of the model)")
    encoder = image_encoder(model)
    candidates = _image_candidates(model, config, seed) if encoder is not None else []
    for candidate in candidates:
        count = feature_rows(encoder, candidate, BATCH, feature_method(encoder))
        if count:
            return candidate, count
    return {"pixel_values": pixel_values(config, seed)}, None


def make_inputs(task: str, config: Any, seed: int = 0, *, labels: bool = False, model: Any = None) -> dict[str, Any]:
    """Keyword arguments for the model's forward; float tensors are float32 (cast later).
    For image-text-to-text, `model` (the CPU float32 model) tells how many image tokens to put
    in input_ids so that they match its vision features."""
    import torch

    params = inspect.signature(model.forward).parameters if model is not None else {}
    if model is not None and task != "image-text-to-text":
        from conformance.models.wrapped import wrapped_inputs, wrapped_vlm

        inner = wrapped_vlm(model)
        if inner is not None:
            return wrapped_inputs(model, make_inputs("image-text-to-text", inner.config, seed, model=inner))
    from conformance.models.policy_inputs import policy_inputs, takes_policy_inputs

    if model is not None and takes_policy_inputs(model):
        return policy_inputs(model, seed, labels)
    from conformance.models.session_inputs import session_inputs

    session = session_inputs(model, seed) if model is not None else None
    if session is not None:
        return session
    if task == "image-classification" and params and "pixel_values" not in params:
        task = "base"  # an image classifier over pixel-cluster tokens (ImageGPT): what its forward takes
    if task not in LEGACY_TASKS or (params and not {"input_ids", "pixel_values"} & set(params)) \
            or "shared_kv_states" in params or _aligned_audio(model, config):
        # (a legacy task's head that takes neither text nor images, Pix2Struct's patches, too; a
        # draft model that reads its target's K/V, drafts.py; text aligned with audio frames)
        from conformance.models.modalities import signature_inputs

        if model is None:
            raise ValueError(f"inputs for {task} are built from the model's forward signature; pass model")
        from conformance.models.image_slots import takes_image_slots

        if (image_token_id(config) is not None and image_encoder(model) is not None or takes_image_slots(model)) \
                and "input_ids" in params:
            task = "image-text-to-text"  # a vision-language model: image tokens must match its features
        else:
            inputs = _with_question_tokens(config, _with_audio_tokens(model, config, signature_inputs(task, model, seed)))
            # Other heads' labels are structured; an audio frame classifier wants one label per
            # feature frame, a count only its feature encoder knows: it is differentiated through
            # the runner's surrogate loss instead.
            if labels and task.endswith("classification") and task != "audio-frame-classification":
                inputs["labels"] = _labels(task, inputs, seed)
            return inputs
    if task == "image-classification" and "input_ids" in params and image_token_id(config) is not None \
            and image_encoder(model) is not None:
        task = "image-text-to-text"  # a vision-language classifier (ShieldGemma 2) reads a prompt too
    if task == "image-classification":
        inputs: dict[str, Any] = {"pixel_values": pixel_values(config, seed)}
        if model is not None and "spatial_shapes" in inspect.signature(model.forward).parameters:
            from conformance.models.patches import naflex_patches  # NaFlex classifiers (Siglip2)

            inputs = naflex_patches(getattr(config, "vision_config", None) or config, seed)
        if labels:
            inputs["labels"] = torch.randint(0, NUM_LABELS, (BATCH,), generator=_generator(seed + 2))
        return inputs
    from conformance.models.documented import stacked_rows

    ids = token_ids(config, (BATCH * stacked_rows(model, "input_ids"), SEQ_LEN), seed)
    eos = getattr(text_config(config), "eos_token_id", None)
    if task == "sequence-classification" and isinstance(eos, int) and not isinstance(eos, bool):
        ids[:, -1] = eos  # encoder-decoder classifiers pool the hidden state at each row's <eos>
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if task == "seq2seq-lm" or (task == "image-text-to-text" and model is not None and _is_encoder_decoder(model)):
        inputs["decoder_input_ids"] = token_ids(
            config, (BATCH * stacked_rows(model, "decoder_input_ids"), DECODER_LEN), seed + 3)
    if task == "image-text-to-text":
        images, count = image_inputs(model, config, seed) if model is not None else ({}, None)
        if count or model is None or "pixel_values" in inspect.signature(model.forward).parameters:
            inputs.update(images or {"pixel_values": pixel_values(config, seed)})
        # else a text-only head of a vision-language type (DiffusionGemma's block diffusion)
        token = image_token_id(config)
        if model is not None:
            from conformance.models.image_slots import slot_inputs

            inputs.update(slot_inputs(model, ids, inputs, count))
            ids = inputs["input_ids"]
        if token is not None and count:
            ids = with_image_tokens(ids, token, count, image_bounds(config))
            inputs.update(input_ids=ids, attention_mask=torch.ones_like(ids))
            if "mm_token_type_ids" in inspect.signature(model.forward).parameters:
                # multimodal RoPE (Qwen2-VL family) places tokens by type: 1 marks image tokens
                inputs["mm_token_type_ids"] = (ids == token).long()
    if "bbox" in params and "bbox" not in inputs:
        # a document model (UDOP) places each token on its page: one layout box per token
        from conformance.models.modalities import layout_boxes

        inputs["bbox"] = layout_boxes(tuple(inputs["input_ids"].shape), seed)
    if labels:
        if task == "sequence-classification":
            inputs["labels"] = torch.randint(0, NUM_LABELS, (BATCH,), generator=_generator(seed + 2))
        else:
            conventional = inputs["decoder_input_ids"] if task == "seq2seq-lm" else ids
            if model is None:
                inputs["labels"] = conventional.clone()
            else:  # the layout the model's own loss head accepts (labels.py)
                from conformance.models.labels import fit_labels

                inputs = fit_labels(model, inputs, conventional.clone(), seed)
    return inputs


def _is_encoder_decoder(model: Any) -> bool:
    return bool(getattr(model.config, "is_encoder_decoder", False)) \
        and "decoder_input_ids" in inspect.signature(model.forward).parameters


def _with_audio_tokens(model: Any, config: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Audio-language models splice their audio features in at audio placeholder tokens: put as
    many in input_ids as `get_audio_features` makes rows per clip (measured, like images)."""
    import torch

    token = image_token_id(config, AUDIO_TOKEN_KEYS)
    from conformance.models.speech_text import audio_encoder, audio_feature_params

    aligned = _aligned_audio(model, config) and "input_ids" not in inputs
    encoder = audio_encoder(model)
    if (token is None and not aligned) or ("input_ids" not in inputs and not aligned) or encoder is None:
        return inputs
    accepted = audio_feature_params(encoder)
    if "kwargs" in accepted:  # a head that hands everything on: the audio itself
        accepted |= {"input_features", "input_values"}
    audio = {k: v for k, v in inputs.items() if k in accepted and k not in ("input_ids", "attention_mask")}
    count = feature_rows(encoder, audio, BATCH, "get_audio_features") if audio else None
    if not count or (aligned and count < 2):
        return inputs
    if aligned:  # one token per audio frame: the frames are added to the token embeddings
        ids = token_ids(config, (BATCH, count), 0)
    else:
        ids = with_image_tokens(inputs["input_ids"], token, count)
    out = {**inputs, "input_ids": ids}
    if "attention_mask" in inputs:
        out["attention_mask"] = torch.ones_like(ids)
    return out


def _with_question_tokens(config: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """One question token in every row, after its first token, where the config names one."""
    token = image_token_id(config, QUESTION_TOKEN_KEYS)
    if token is None or "input_ids" not in inputs:
        return inputs
    ids = inputs["input_ids"].clone()
    ids[:, 1] = token
    return {**inputs, "input_ids": ids}


def _aligned_audio(model: Any, config: Any) -> bool:
    """A model that adds its audio features to the token embeddings frame by frame (streaming
    speech recognition, Voxtral Realtime): it takes text and audio together, no audio placeholders."""
    if model is None or not hasattr(model, "get_audio_features"):
        return False
    params = inspect.signature(model.forward).parameters
    return {"input_ids", "input_features"} <= set(params) and image_token_id(config, AUDIO_TOKEN_KEYS) is None


def _labels(task: str, inputs: dict[str, Any], seed: int):
    """Class labels per sample (classification heads), per token (token classification)."""
    import torch

    ids = inputs.get("input_ids")
    if task == "token-classification" and ids is not None:
        return torch.randint(0, NUM_LABELS, tuple(ids.shape), generator=_generator(seed + 2))
    return torch.randint(0, NUM_LABELS, (BATCH,), generator=_generator(seed + 2))


def cast_inputs(inputs: dict[str, Any], device: Any = None, dtype: Any = None) -> dict[str, Any]:
    """Move tensors (nested in dicts and lists too: SDXL's added_cond_kwargs, a Diffusers
    autoencoder's encode and decode inputs) to `device`; floating tensors also take `dtype`."""
    import torch
    from torch.utils import _pytree as pytree

    from conformance.models.session_inputs import SESSION, remade

    def cast(value):
        if isinstance(value, torch.Tensor):
            return value.to(device=device, dtype=dtype if value.is_floating_point() and dtype else value.dtype)
        return value

    out = {}
    for key, value in inputs.items():
        if key == SESSION:  # a video tracker's stateful session: a fresh one per run
            out[key] = remade(value, device, dtype)
        elif isinstance(value, (dict, list, tuple)):
            out[key] = pytree.tree_map(cast, value)
        else:
            out[key] = cast(value)
    return out
