"""The sizes a tiny Diffusers model's inputs take, read off its config: batch, channels, the
spatial side (a multiple of every downsampling and patching the model does), frames and text
length. One `Geometry` per model, so every input of one forward agrees with the others.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

BATCH = 2
TEXT_LENGTH = 8
MIN_SIDE = 8
# Config keys naming the channels of the sample a denoiser (or encoder) takes, most specific first.
SAMPLE_CHANNEL_KEYS = ("in_channels", "encoder_in_channels", "audio_channels", "in_visual_dim", "io_channels", "in_dim", "input_channels", "latent_channels",
                       "z_channels", "num_channels", "channels")
# Config keys naming the width of the text (conditioning) sequence, most specific first.
TEXT_WIDTH_KEYS = ("joint_attention_dim", "cross_attention_dim", "caption_channels", "text_embed_dim", "text_dim",
                   "context_in_dim", "text_emb_dim", "cap_feat_dim", "encoder_hid_dim", "in_text_dim",
                   "text_hidden_dim", "text_encoder_dim", "cond_token_dim", "encoder_hidden_size", "text_in_dim",
                   "condition_dim", "cross_attention_input_dim", "txt_in_features", "dit_text_dim",
                   "text_embed_2_dim", "encoder_hidden_states_channels", "crossattn_proj_in_channels", "context_dim",
                   "clip_text_in_channels", "hidden_size")
FRAME_TABLE_KEYS = ("video_length",)
POOLED_WIDTH_KEYS = ("pooled_projection_dim", "pooled_embed_dim", "clip_text_pooled_in_channels", "in_text_dim2",
                     "text_embed_2_dim", "global_states_input_dim", "projection_class_embeddings_input_dim",
                     "cond_embed_dim", "pooled_dim")


def _int(value: Any) -> int | None:
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
        return max(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def first_int(config: dict[str, Any], keys: tuple[str, ...], default: int | None = None) -> int | None:
    for key in keys:
        value = _int(config.get(key))
        if value is not None and value > 0:
            return value
    return default


def _patch(config: dict[str, Any]) -> tuple[int, int]:
    """(temporal, spatial) patch sizes."""
    patch = config.get("patch_size")
    if isinstance(patch, (list, tuple)) and patch:
        spatial = max(p for p in patch if isinstance(p, int)) if any(isinstance(p, int) for p in patch) else 1
        temporal = patch[0] if len(patch) == 3 and isinstance(patch[0], int) else 1
    else:
        spatial, temporal = (patch if isinstance(patch, int) and patch > 0 else 1), 1
    temporal = _int(config.get("patch_size_t")) or temporal
    return temporal, spatial


def spatial_factor(config: dict[str, Any]) -> int:
    """How much the model shrinks the sample's height and width on its way down."""
    explicit = first_int(config, ("spatial_compression_ratio", "scale_factor_spatial", "downsampling_ratio",
                                  "spatial_downsample_factors"))
    if explicit:
        return explicit
    stages = config.get("block_out_channels") or config.get("down_block_types") or config.get("dim_mult") \
        or config.get("ch_mult") or config.get("encoder_block_out_channels")
    factor = 2 ** (len(stages) - 1) if isinstance(stages, (list, tuple)) and stages else 1
    return factor


AUDIO_RATIO_KEYS = ("downsampling_ratios", "encoder_rates", "strides", "enc_strides", "upsampling_ratios")


def modality_audio_factor(config: dict[str, Any]) -> int:
    """How much a waveform codec shortens its input (the product of its stage strides), as the
    side whose square is the audio length must cover."""
    for key in AUDIO_RATIO_KEYS:
        value = config.get(key)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
            return math.isqrt(math.prod(value)) + 1
    ratio = _int(config.get("downsampling_ratio"))
    return math.isqrt(ratio) + 1 if ratio else 1


@dataclasses.dataclass(frozen=True)
class Geometry:
    batch: int
    channels: int
    side: int  # height and width of the sample
    frames: int
    text_length: int
    text_width: int | None
    patch: int
    temporal_patch: int

    @property
    def tokens(self) -> int:
        """Patch tokens of one frame."""
        return (self.side // self.patch) ** 2


def geometry_of(config: dict[str, Any]) -> Geometry:
    temporal, spatial = _patch(config)
    factor = spatial_factor(config)
    side = max(MIN_SIDE, 2 * math.lcm(factor, spatial))
    sample_size = _int(config.get("sample_size"))
    if sample_size and sample_size % math.lcm(factor, spatial) == 0 and sample_size <= 4 * side:
        side = max(side, sample_size) if sample_size <= 32 else side
    temporal_factor = first_int(config, ("temporal_compression_ratio", "scale_factor_temporal", "temporal_compress_times"), 1)
    if modality_audio_factor(config) > 1:
        side = max(side, 2 * modality_audio_factor(config))  # an audio sample's length is side x side
    frames = max(2 * temporal, 1 + temporal_factor if temporal_factor > 1 else 2)
    # a learned table of one position per frame (Latte's `video_length`) fixes the frame count
    frames = first_int(config, FRAME_TABLE_KEYS, frames)
    channels = first_int(config, SAMPLE_CHANNEL_KEYS, 4)
    return Geometry(BATCH, channels, side, frames, TEXT_LENGTH, first_int(config, TEXT_WIDTH_KEYS), spatial, temporal)
