"""Shrink rules: a Diffusers model's default constructor arguments rebuilt tiny.

Diffusers models keep their config in the `__init__` signature (`register_to_config`), so the
default config is the signature's defaults. The rules name arguments by kind, as data:

* head counts -> HEADS, per-head widths -> HEAD_DIM (a UNet's `attention_head_dim`, which is a
  head count there, is a head count);
* widths (hidden, cross-attention, text, pooled, FFN, time-embedding, channel lists) are divided by
  WIDTH_DIVISOR, so every linear join between them (SDXL's projection width = text width + 6 time
  ids x their width, ...) still holds; a width equal to the old attention width (heads x head dim)
  follows the new one;
* layer counts -> LAYERS, layers per block -> 1 (lists element by element);
* rotary axes that split the head width are rescaled to the new head width, each even;
* norm groups divide every shrunk channel width;
* sizes of the sample and of learned position tables are capped.

A rule only ever shrinks. `overrides.py` holds the few classes no rule reaches.
"""

from __future__ import annotations

import inspect
import math
import re
from typing import Any

from conformance.models.diffusers.geometry import TEXT_LENGTH

HEADS = 2
HEAD_DIM = 16
LAYERS = 2
WIDTH_DIVISOR = 16
MIN_WIDTH = 8
CHANNEL_STEP = 32
CHANNELS_LEFT_TO_CHECKPOINT = 32  # a latent width norm layers with 32 groups accept
SAMPLE_SIZE = 16
FRAMES = 4

HEAD_COUNT = re.compile(r"^(num_)?(\w+_)?(attention_)?(heads|n_heads|nheads|num_heads)$|^(num_)?\w*_heads$|"
                        r"^num_key_value(_attention)?_heads$|^n_kv_heads$|^num_kv_heads$")
HEAD_WIDTH = re.compile(r"^(\w+_)?(attention_head_dim|head_dim|dim_head|dim_heads|d_kv|attn_head_dim)$")
LAYER_COUNT = re.compile(r"^(num_|n_)?(\w+_)?(layers|layer|blocks|depth|n_layer|nlayers)$|^depth$|"
                         r"^num_\w*_(layers|blocks)$")
PER_BLOCK = re.compile(r"^(\w+_)?(layers_per_\w*block|num_res_blocks|transformer_layers_per_\w*block|"
                       r"layers_per_\w+|num_layers_per_block)$")
ROPE_AXES = re.compile(r"^(\w+_)?(axes_dims?(_rope)?|rope_axes_dim|rope_dim_list|axes_dim_rope|axes_dims_a|"
                       r"mrope_section|rope_dim)$")
WIDTH = re.compile(r"(_dim|_dims|_channels|_channel|_features|_size|_width|^dim|^channels|hidden_dim|^d_model|^d_ff|^n_embd|"
                   r"^n_inner|^ch|^ch_\w+|_embed_dim|^model_dim\w*|^ff_dim\w*|^time_dim\w*|embedding_dim)$")
# Widths that are the data's own (latent channels, pixels, mel bins, vocabularies) or a grid, not
# a layer's: shrinking them changes what the inputs and the pretrained statistics must look like.
KEPT = re.compile(r"^(in_channels|out_channels|latent_channels|z_channels|latent_channel|conditioning_channels|"
                  r"input_channels|output_channels|z_dim|latent_dim|audio_in_channels|audio_out_channels|"
                  r"patch_size\w*|\w*_patch_size\w*|sample_size|\w*vocab_size|kernel_size|\w*_kernel_size|"
                  r"codebook_size|codebook_dim|vq_embed_dim|num_vq_embeddings|mel_bins|num_mels|n_fft|hop_size|"
                  r"\w*hop_length|\w*sampling_rate|sample_rate|max_size|pos_embed_max_size|max_resolution|"
                  r"target_size|image_size|tile_sizes|motion_encoder_size|fsq_dim|\w*_levels|action_dim|"
                  r"num_channels|io_channels|audio_channels|\w*_sample_size|"
                  r"encoder_input_size|pool_window_size|min_num_\w+|max_num_\w+|\w*_batch_size|\w*max_\w*size)$")
NORM_GROUPS = re.compile(r"^(\w+_)?norm_num_groups$|^groups$")
# Sizes a default config leaves to the checkpoint (None) that the modules need.
LEFT_TO_CHECKPOINT = {"in_channels": CHANNELS_LEFT_TO_CHECKPOINT, "patch_size": 2, "sample_size": SAMPLE_SIZE}
# Base widths that a stack of convs multiplies (by ch_mult, dim_mult): channel widths.
BASE_CHANNELS = ("ch", "base_dim", "base_channels", "model_channels", "decoder_base_dim", "channels_base")
MODEL_HEADS = ("num_attention_heads", "num_heads", "n_heads", "nheads", "heads")
MODEL_WIDTHS = ("hidden_size", "dim", "model_dim", "inner_dim", "d_model", "width", "embed_dim")
LENGTHS = {"sample_size": SAMPLE_SIZE, "num_frames": FRAMES, "sample_frames": FRAMES,
           "max_text_seq_length": TEXT_LENGTH, "text_len": TEXT_LENGTH, "text_len_t5": TEXT_LENGTH,
           "vocab_size": 256, "max_sequence_length": 32, "max_seq_length": 32,
           "num_embeds_ada_norm": 1000, "max_position_embeddings": 256, "rope_max_seq_len": 256,
           "num_positional_embeddings": 64, "n_positions": 64, "clip_length": 8, "video_length": 4}


def default_config(cls: type) -> dict[str, Any]:
    """The constructor's keyword defaults (a required argument maps to inspect.Parameter.empty)."""
    params = inspect.signature(cls.__init__).parameters
    return {name: p.default for name, p in params.items()
            if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(_is_int(v) for v in value)


def _each(value: Any, rule) -> Any:
    """`rule` on an int, or on each int of a list/tuple (kept a list/tuple)."""
    if _is_int(value):
        return rule(value)
    if _ints(value):
        return type(value)(rule(v) for v in value)
    return value


def _is_unet(values: dict[str, Any]) -> bool:
    """UNet-style configs name their head count `attention_head_dim` (the width comes from channels)."""
    return "block_out_channels" in values and "down_block_types" in values


def _width(value: int) -> int:
    if value <= MIN_WIDTH:
        return value
    if value % WIDTH_DIVISOR == 0:
        return max(MIN_WIDTH, value // WIDTH_DIVISOR)
    return min(value, 4 * MIN_WIDTH)


def _channel(value: int) -> int:
    """A conv stage's width: a multiple of CHANNEL_STEP (norm layers hard-code 32 groups), ratios kept roughly."""
    if value <= CHANNEL_STEP:
        return value
    return max(CHANNEL_STEP, CHANNEL_STEP * round(value / WIDTH_DIVISOR / CHANNEL_STEP))


def _heads(value: int) -> int:
    return min(value, HEADS)


def _rope_axes(axes: Any, head_dim: int) -> Any:
    """Axes that split `head_dim` in proportion, each even and at least 2, summing to it."""
    total = sum(axes)
    scaled = [max(2, 2 * round(a * head_dim / total / 2)) for a in axes]
    scaled[-1] += head_dim - sum(scaled)
    if scaled[-1] < 2:  # too many axes for the width: the smallest even split
        scaled = [2] * len(axes)
    if scaled[-1] < 2:
        return axes
    return type(axes)(scaled)


def _inner_width(values: dict[str, Any], prefix: str = "") -> int | None:
    heads = values.get(f"{prefix}num_attention_heads")
    head_dim = values.get(f"{prefix}attention_head_dim")
    if _is_int(heads) and _is_int(head_dim):
        return heads * head_dim
    return None


def shrink(values: dict[str, Any]) -> dict[str, Any]:
    """Constructor kwargs that rebuild `values` (a default config) tiny: only the keys that change."""
    out: dict[str, Any] = {}
    unet = _is_unet(values)
    for key, value in values.items():
        if value is inspect.Parameter.empty or isinstance(value, bool):
            continue
        if key in LENGTHS and _is_int(value):
            out[key] = min(value, LENGTHS[key])
        elif unet and key in ("attention_head_dim", "num_attention_heads"):
            out[key] = _each(value, _heads)
        elif HEAD_COUNT.match(key):
            out[key] = _each(value, _heads)
        elif HEAD_WIDTH.match(key):
            out[key] = _each(value, lambda v: min(v, HEAD_DIM))
        elif PER_BLOCK.match(key):
            out[key] = _each(value, lambda v: min(v, 1))
        elif LAYER_COUNT.match(key) and _is_int(value):
            out[key] = min(value, LAYERS if value > 0 else value)
        elif KEPT.match(key) or ROPE_AXES.match(key) or NORM_GROUPS.match(key):
            continue
        elif key in BASE_CHANNELS or (WIDTH.search(key) and ("channel" in key or _ints(value))):
            out[key] = _each(value, _channel)
        elif WIDTH.search(key):
            out[key] = _each(value, _width)
    for key, size in LEFT_TO_CHECKPOINT.items():
        # a patch size of None is no patching, unless the input width is left open too (a DiT)
        if values.get(key, 0) is None and (key != "patch_size" or values.get("in_channels", 0) is None):
            out[key] = size
    if values.get("in_channels", 0) is None and values.get("out_channels", 0) is None:
        out["out_channels"] = out["in_channels"]  # both left to the checkpoint: a denoiser's out is its in
    for key in ("num_kv_heads", "num_key_value_heads", "n_kv_heads"):
        heads = next((k for k in MODEL_HEADS if _is_int(values.get(k))), None)
        if values.get(key, 0) is None and heads is not None:
            out[key] = min(values[heads], HEADS)  # plain multi-head attention
    vocab = out.get("vocab_size")
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if vocab and _is_int(values.get(key)) and values[key] >= vocab:
            out[key] = vocab - 1  # a special token id stays inside the shrunk vocabulary (OmniGen's padding)
    out = {k: v for k, v in out.items() if v != values.get(k)}
    _model_width_follows_heads(values, out)
    _follow_inner_width(values, out)
    _layer_indices_follow_layers(values, out)
    _rope_follows_head_width(values, out)
    _norm_groups_divide_channels(values, out)
    return out


def _model_width_follows_heads(values: dict[str, Any], out: dict[str, Any]) -> None:
    """A model width split into heads with no head-width argument (hidden_size / dim with heads)
    becomes HEADS x the shrunk head width, and widths equal to it follow."""
    heads_key = next((k for k in MODEL_HEADS if _is_int(values.get(k))), None)
    width_key = next((k for k in MODEL_WIDTHS if _is_int(values.get(k))), None)
    if width_key is None or _is_int(values.get("attention_head_dim")):
        return
    if heads_key is None:  # heads implied: the rotary axes split one head (Kandinsky)
        axes = next((v for k, v in values.items() if ROPE_AXES.match(k) and _ints(v)), None)
        if axes is None or values[width_key] % sum(axes):
            return
        heads = values[width_key] // sum(axes)
    elif values[width_key] % values[heads_key]:
        return
    else:
        heads = values[heads_key]
    old_width, old_head = values[width_key], values[width_key] // heads
    head = min(old_head, HEAD_DIM)
    new_heads = min(heads, HEADS)
    if heads_key is not None:
        out[heads_key] = new_heads
    new_width = new_heads * head
    for key, value in values.items():
        if value == old_width and _is_int(value) and (key == width_key or (WIDTH.search(key) and not KEPT.match(key))):
            out[key] = new_width
    for key in ("num_key_value_heads", "num_kv_heads", "n_kv_heads"):
        if heads_key is not None and _is_int(values.get(key)) and values[key] == values[heads_key]:
            out[key] = out[heads_key]
    for key, value in values.items():
        if ROPE_AXES.match(key) and _ints(value) and sum(value) == old_head:
            out[key] = _rope_axes(value, head)


def _layer_indices_follow_layers(values: dict[str, Any], out: dict[str, Any]) -> None:
    """Lists of layer indices (VACE layers, control places) keep the indices the shrunk model has."""
    counts = [out[k] for k in out if LAYER_COUNT.match(k) and _is_int(out[k])]
    if not counts:
        return
    layers = max(counts)
    for key, value in values.items():
        if _ints(value) and re.search(r"layers|places|layer_ids|blocks", key) and max(value) >= layers \
                and not PER_BLOCK.match(key) and key not in out:
            kept = [v for v in value if v < layers]
            out[key] = type(value)(kept or [0])


def _follow_inner_width(values: dict[str, Any], out: dict[str, Any]) -> None:
    """Widths equal to the attention width (heads x head dim) take the new attention width; so do the
    widths of a second stream that has its own heads (LTX-2's `audio_num_attention_heads` and
    `audio_attention_head_dim`: the `audio_` widths equal to the old audio attention width)."""
    prefixes = [""] + [key.removesuffix("num_attention_heads") for key in values
                       if key.endswith("_num_attention_heads") and f"{key.removesuffix('num_attention_heads')}"
                       f"attention_head_dim" in values]
    for prefix in prefixes:
        old = _inner_width(values, prefix)
        new = _inner_width({**values, **out}, prefix)
        if old is None or new is None or old == new:
            continue
        for key, value in values.items():
            if _is_int(value) and value == old and key.startswith(prefix) and WIDTH.search(key) \
                    and not KEPT.match(key) and key not in (f"{prefix}num_attention_heads", f"{prefix}attention_head_dim"):
                out[key] = new


def _rope_follows_head_width(values: dict[str, Any], out: dict[str, Any]) -> None:
    head_dim = {**values, **out}.get("attention_head_dim")
    old_head_dim = values.get("attention_head_dim")
    for key, value in values.items():
        if ROPE_AXES.match(key) and _ints(value) and _is_int(head_dim) and _is_int(old_head_dim):
            if sum(value) == old_head_dim:
                out[key] = _rope_axes(value, head_dim)
            elif 2 * sum(value) == old_head_dim:  # mrope sections count pairs of dims
                out[key] = type(value)(v // 2 for v in _rope_axes([2 * v for v in value], head_dim))
            elif sum(value) < old_head_dim and head_dim < old_head_dim:  # rotary on part of the head
                part = max(2 * len(value), 2 * round(sum(value) * head_dim / old_head_dim / 2))
                out[key] = _rope_axes(value, part)
        elif key in ("rope_dim", "rotary_dim", "rope_freq_dim") and _is_int(value) and _is_int(head_dim) and value > head_dim:
            out[key] = head_dim


def _norm_groups_divide_channels(values: dict[str, Any], out: dict[str, Any]) -> None:
    """Norm groups become the largest count (at most the default) dividing every channel width."""
    merged = {**values, **out}
    widths = [v for key, value in merged.items() if ("channels" in key or key in ("base_dim", "dim", "ch"))
              and not KEPT.match(key)
              for v in (value if _ints(value) else [value] if _is_int(value) else []) if v > 0]
    for key, value in values.items():
        if NORM_GROUPS.match(key) and _is_int(value) and widths:
            # half the common width: blocks that halve a stage's width (Kandinsky 3) still divide
            common = max(1, math.gcd(*widths) // 2)
            out[key] = max(d for d in range(1, value + 1) if common % d == 0 and d <= value)
