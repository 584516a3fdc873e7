"""Inputs for the task tables beyond text generation, built from the model's forward signature
and its own config: token ids and masks, layout boxes, pixel values at the config's image size,
video frames, raw waveforms or audio features (through the type's own feature extractor, built
from its defaults, nothing downloaded), time series.

Each rule below fills one forward parameter; a forward whose main input no rule knows raises
MissingInputBuilder (the census cause "input builder missing").
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from conformance.models.documented import MAIN_INPUTS, MissingInputBuilder, documented_inputs
from conformance.models.documented import required_params as _required
from conformance.models.time_series import SERIES_INPUTS, series_builder
from conformance.models.tasks import mapping_of
from conformance.models.tokens import BATCH, SEQ_LEN, _generator
from conformance.models.tokens import config_value as _get

CHOICES = 2
WAVEFORM_SECONDS = 0.5  # x-vector heads' dilated convolutions need about 15 frames


def _side(value: Any) -> tuple[int, int]:
    if isinstance(value, (list, tuple)):
        return int(value[0]), int(value[-1])
    if isinstance(value, dict):
        return int(value.get("height", 32)), int(value.get("width", 32))
    return int(value), int(value)


def _tokens(config, model, seed, task):
    from conformance.models.tokens import token_ids

    from conformance.models.documented import stacked_rows

    rows = BATCH * stacked_rows(model, "input_ids")
    shape = (BATCH, CHOICES, SEQ_LEN) if task == "multiple-choice" else (rows, SEQ_LEN)
    return token_ids(config, shape, seed)


def _pixels(config, model, seed, task):
    import torch

    channels = int(_get(config, "num_channels", "in_channels", default=3))
    height, width = _side(_get(config, "image_size", "img_size", "max_img_size", default=32))
    if "prompt_pixel_values" in inspect.signature(model.forward).parameters:
        height //= 2  # in-context segmenters (SegGPT) stack prompt over input: image_size is the pair's
    shape = (BATCH, channels, height, width)
    if task == "video-classification" or "video" in type(model).__name__.lower() \
            or isinstance(getattr(config, "num_frames", None) or getattr(getattr(config, "vision_config", None),
                                                                          "num_frames", None), int):  # a video model's own config counts frames
        shape = (BATCH, int(_get(config, "num_frames", default=4)), channels, height, width)
    if task == "keypoint-matching" or config.model_type in mapping_of("keypoint-matching"):
        shape = (BATCH, 2, channels, height, width)  # the two images whose keypoints are matched (a matcher's base too)
    return torch.randn(shape, generator=_generator(seed + 1))


def _decision(values: tuple[int, ...]):
    """Decision heads (Jev) score the options of questions marked in one prompt: per question, the
    1-based position of its mark, its option count and its question type."""
    def build(config, model, seed, task):
        import torch

        return torch.tensor([list(values)])
    return build


def _qformer_tokens(config, model, seed, task):
    """The text prompt a Q-Former reads beside the image (InstructBLIP), in its own vocabulary."""
    from conformance.models.tokens import token_ids

    return token_ids(getattr(config, "qformer_config", None) or config, (BATCH, SEQ_LEN), seed + 8)


def _high_res_pixels(config, model, seed, task):
    """The high-resolution view a hybrid vision tower (DeepSeek-VL hybrid) reads beside the image."""
    import torch

    high = getattr(config, "high_res_vision_config", None) or config
    height, width = _side(getattr(high, "image_size", None) or 32)
    return torch.randn((BATCH, int(getattr(high, "num_channels", 3) or 3), height, width),
                       generator=_generator(seed + 9))


def _flattened_patches(config, model, seed, task):
    """Pix2Struct's variable-resolution patches: per patch its 1-based row and column, then its
    pixels (patch_embed_hidden_size of them), on a 4 x 4 grid."""
    import torch

    width = int(_get(config, "patch_embed_hidden_size", default=768))
    rows, cols = torch.meshgrid(torch.arange(1, 5), torch.arange(1, 5), indexing="ij")
    places = torch.stack([rows.flatten(), cols.flatten()], dim=-1).float().unsqueeze(0).repeat(BATCH, 1, 1)
    pixels = torch.randn((BATCH, places.shape[1], width), generator=_generator(seed + 1))
    return torch.cat([places, pixels], dim=-1)


def _prompt(kind: str):
    """Open-vocabulary detectors (OmDet-Turbo) read a task prompt per image and CHOICES class
    names per image, flattened, with how many classes each image has (`classes_structure`)."""
    def build(config, model, seed, task):
        import torch

        from conformance.models.tokens import token_ids

        rows = BATCH * CHOICES if kind.startswith("classes") else BATCH
        if kind == "classes_structure":
            return torch.full((BATCH,), CHOICES, dtype=torch.long)
        ids = token_ids(config, (rows, SEQ_LEN), seed + (10 if kind.startswith("classes") else 11))
        return ids if kind.endswith("input_ids") else torch.ones_like(ids)
    return build


def _task_tokens(config, model, seed, task):
    """The tokenized task prompt of task-conditioned segmenters (OneFormer), at its own length."""
    from conformance.models.tokens import token_ids

    return token_ids(config, (BATCH, int(_get(config, "task_seq_len", default=SEQ_LEN))), seed + 7)


def _masked_patches(config, model, seed, task):
    """Masked-patch pretraining (VideoMAE): which patches (tubelets for video) to mask, half of
    each sample's, as the heads require the same count per sample."""
    import torch

    height, width = _side(_get(config, "image_size", default=32))
    patch = int(_get(config, "patch_size", default=8))
    frames = int(_get(config, "num_frames", default=1)) // int(_get(config, "tubelet_size", default=1))
    count = max(frames, 1) * (height // patch) * (width // patch)
    order = torch.rand((BATCH, count), generator=_generator(seed + 6)).argsort(dim=1)
    return order < count // 2


def _boxes(config, model, seed, task):
    return layout_boxes((BATCH, SEQ_LEN), seed)


def layout_boxes(tokens: tuple[int, ...], seed: int):
    """Layout boxes (x0, y0, x1, y1) in 0..1000 with x0 <= x1 and y0 <= y1, one per token of
    token ids shaped `tokens`."""
    import torch

    corners = torch.randint(0, 1000, (*tokens, 2, 2), generator=_generator(seed + 4))
    low, high = corners.min(dim=2).values, corners.max(dim=2).values
    return torch.cat([low, high], dim=-1)


def _extractor_types(model_type: str) -> list[str]:
    """`model_type`, then the types it is a part of by name, longest first: an audio tower
    ("qwen2_audio_encoder") shares the feature extractor of its model ("qwen2_audio")."""
    parts = model_type.split("_")
    return [model_type] + ["_".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def _feature_extractor(model):
    """The feature extractor of the type (or of the model it is a part of) with its default
    settings, or None."""
    import transformers
    from transformers.models.auto import feature_extraction_auto

    names = feature_extraction_auto.FEATURE_EXTRACTOR_MAPPING_NAMES
    for model_type in _extractor_types(model.config.model_type):
        cls = getattr(transformers, names.get(model_type) or "", None)
        if cls is not None:
            return cls()
    return None


def _extractor_features(config, model, seed):
    """(the feature extractor's output for BATCH random waveforms, or None without an extractor;
    the waveforms). The extractor makes as many mel bins as the model's config asks for."""
    import numpy as np

    extractor = _feature_extractor(model)
    mel_bins = _get(config, "num_mel_bins")
    if extractor is not None and isinstance(mel_bins, int) and getattr(extractor, "feature_size", mel_bins) != mel_bins:
        try:
            extractor = type(extractor)(feature_size=mel_bins)
        except TypeError:  # an extractor whose feature size is fixed
            pass
    rate = int(getattr(extractor, "sampling_rate", 16000) or 16000)
    rng = np.random.default_rng(seed)
    waves = [rng.standard_normal(int(rate * WAVEFORM_SECONDS)).astype(np.float32) for _ in range(BATCH)]
    if extractor is None:
        return None, waves
    return extractor(waves, sampling_rate=rate, return_tensors="pt"), waves


def _audio(key: str):
    def build(config, model, seed, task):
        import numpy as np
        import torch

        features, waves = _extractor_features(config, model, seed)
        if features is None and key == "input_values":
            return torch.from_numpy(np.stack(waves))
        if features is None or key not in features:
            # no extractor, or one for another input (wav2vec2-bert maps to the raw-waveform one):
            # features of the shape the forward documents
            documented = documented_inputs(model, config, {key}, seed)
            if key in documented:
                return documented[key]
            maker = "the type has no feature extractor" if features is None else "its feature extractor makes none"
            raise MissingInputBuilder(f"{type(model).__name__} takes {key} but {maker}")
        return features[key].float()
    return build


def _audio_mask(config, model, seed, task):
    """The frame mask the feature extractor returns beside the features, else every frame of its
    (batch, mel bins, frames) or (batch, frames, mel bins) features valid."""
    import torch

    features, _ = _extractor_features(config, model, seed)
    if features is None or "input_features" not in features:
        documented = documented_inputs(model, config, {"input_features_mask", "feature_attention_mask"}, seed)
        if documented:  # beside documented features (see _audio)
            return next(iter(documented.values()))
        raise MissingInputBuilder(f"no feature extractor of {type(model).__name__} makes features to mask")
    mask = next((features[k] for k in ("input_features_mask", "attention_mask", "feature_attention_mask")
                 if k in features), None)
    if mask is None:
        shape = features["input_features"].shape
        frames = shape[-1] if shape[1] == _get(config, "num_mel_bins", default=shape[-1]) else shape[1]
        mask = torch.ones((shape[0], frames))
    return mask.long()


def _region_features(width_key: str, default: int):
    """Detected-region inputs of vision-language encoders (LXMERT): per image, SEQ_LEN regions
    of the config's feature width (box features), or of its position width (boxes in 0..1)."""
    def build(config, model, seed, task):
        import torch

        width = int(_get(config, width_key, default=default))
        return torch.rand((BATCH, SEQ_LEN, width), generator=_generator(seed + 8))
    return build


# Forward parameter -> builder(config, model, seed, task).
BUILDERS: dict[str, Callable[..., Any]] = {
    "input_ids": _tokens,
    "pixel_values": _pixels,
    "pixel_values_videos": _pixels,
    "bbox": _boxes,
    "bool_masked_pos": _masked_patches,
    "task_inputs": _task_tokens,
    "qformer_input_ids": _qformer_tokens,
    "high_res_pixel_values": _high_res_pixels,
    **{name: _prompt(name) for name in ("classes_input_ids", "classes_attention_mask", "tasks_input_ids",
                                        "tasks_attention_mask", "classes_structure")},
    "flattened_patches": _flattened_patches,
    # in-context segmentation (SegGPT): a prompt image and its mask, both of the input's size
    "prompt_pixel_values": _pixels,
    "prompt_masks": _pixels,
    "marks": _decision((3, SEQ_LEN)),
    "num_options": _decision((2, 2)),
    "question_type_ids": _decision((0, 0)),
    "input_values": _audio("input_values"),
    "input_features": _audio("input_features"),
    "input_features_mask": _audio_mask,
    "feature_attention_mask": _audio_mask,
    # Gemma 3n's audio tower: mel features by another name, and a mask that flags padded frames
    "audio_mel": _audio("input_features"),
    "audio_mel_mask": lambda config, model, seed, task: _audio_mask(config, model, seed, task) == 0,
    "visual_feats": _region_features("visual_feat_dim", 2048),
    "visual_pos": _region_features("visual_pos_dim", 4),
    **{name: series_builder(name) for name in SERIES_INPUTS},  # time_series.py
}


def _has_audio_tokens(config: Any) -> bool:
    """An audio-language model: its text carries audio placeholder tokens (inputs.py places them)."""
    return any(isinstance(_get(config, key), int) for key in ("audio_token_id", "audio_token_index"))

# Parameters built only for a forward that requires them (optional, they change what it computes).
ONLY_WHEN_REQUIRED = frozenset({"bool_masked_pos"})


# Inputs a vision-language model takes beside the image to make its image features.
IMAGE_COMPANIONS = ("qformer_input_ids", "high_res_pixel_values")


def image_companions(model: Any, seed: int) -> dict[str, Any]:
    """The companion inputs (IMAGE_COMPANIONS) the forward takes, each with its mask."""
    import torch

    params = inspect.signature(model.forward).parameters
    out = {name: BUILDERS[name](model.config, model, seed, "image-text-to-text")
           for name in IMAGE_COMPANIONS if name in params}
    for name in list(out):
        mask = name.replace("input_ids", "attention_mask")
        if mask in params:
            out[mask] = torch.ones_like(out[name])
    return out


def without_vision(config: Any, part: str = "vision_config") -> bool:
    """A config whose vision (or other `part`) is optional and left out (EmbeddingGemma 2 is
    text-only unless a checkpoint adds towers): its model takes no input of that part."""
    return part in (getattr(config, "sub_configs", None) or {}) and getattr(config, part, None) is None


def towerless(config: Any, names: list[str]) -> list[str]:
    """`names` less the inputs of the optional towers `config` leaves out, when text is among them."""
    if "input_ids" not in names:
        return names
    left_out = tuple(prefix for part, prefix in (("vision_config", "pixel_values"), ("audio_config", "input_"))
                     if without_vision(config, part))
    return [name for name in names if name == "input_ids" or not name.startswith(left_out)]


def signature_inputs(task: str, model: Any, seed: int) -> dict[str, Any]:
    """Keyword arguments for `model.forward`: every parameter a rule knows that the forward takes,
    an attention mask beside token ids, decoder ids for encoder-decoders."""
    import torch

    params = dict(inspect.signature(model.forward).parameters)
    from conformance.models.codec_inputs import codec_inputs
    from conformance.models.patches import tower_patch_inputs

    from conformance.models.drafts import draft_inputs

    patches = tower_patch_inputs(model, params, seed) or codec_inputs(model, params, seed) \
        or draft_inputs(model, params, seed)
    config = model.config
    if not patches and not any(name in params for name in MAIN_INPUTS):
        from conformance.models.documented import inputs_of_forward_without_main_input

        return inputs_of_forward_without_main_input(model, params, seed)
    wanted = [name for name in BUILDERS if name in params
              and (name not in ONLY_WHEN_REQUIRED or name in _required(params))]
    text_after_audio = False
    if "input_ids" in wanted and any(k in wanted for k in ("input_values", "input_features")) \
            and "input_ids" not in _required(params) and not _has_audio_tokens(config):
        wanted.remove("input_ids")  # speech models that also accept text take audio first (speech_text.py)
        text_after_audio = True
    wanted = towerless(config, wanted)
    if "input_values" in wanted and "input_features" in wanted:
        wanted.remove("input_features")  # an encoder-decoder takes either (not both): the waveform
    inputs = {name: BUILDERS[name](config, model, seed, task) for name in wanted if name not in patches}
    inputs.update(patches)
    if "input_ids" in inputs and "attention_mask" in params:
        inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    if "qformer_input_ids" in inputs and "qformer_attention_mask" in params:
        inputs["qformer_attention_mask"] = torch.ones_like(inputs["qformer_input_ids"])
    # generative visual question answering (BLIP) decodes its answer even outside encoder-decoders
    if "decoder_input_ids" in params and (getattr(config, "is_encoder_decoder", False)
                                          or task == "visual-question-answering"):
        from conformance.models.tokens import DECODER_LEN, token_ids

        from conformance.models.documented import stacked_rows

        rows = BATCH * stacked_rows(model, "decoder_input_ids")
        inputs["decoder_input_ids"] = token_ids(config, (rows, DECODER_LEN), seed + 3)
    inputs.update(documented_inputs(model, config, _required(params) - set(inputs), seed))
    missing = _required(params) - set(inputs)
    if missing:
        raise MissingInputBuilder(f"{type(model).__name__}.forward requires {', '.join(sorted(missing))}")
    if any(k in inputs for k in ("input_values", "input_features")):
        from conformance.models.speech_text import extractor_companions

        inputs.update(extractor_companions(_extractor_features(config, model, seed)[0], params, inputs))
    if text_after_audio:
        from conformance.models.speech_text import with_text_if_needed

        inputs = with_text_if_needed(model, inputs, lambda: _tokens(config, model, seed, task))
    from conformance.models.codebook_tokens import with_codebook_layout

    return with_codebook_layout(model, inputs)
