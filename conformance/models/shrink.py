"""Generic shrink rules: constructor keyword arguments that rebuild a default config tiny.

A rule only ever shrinks a default (min), so small defaults stay. Configs are
strict dataclasses, so the config is rebuilt through its constructor with the
shrunk sizes and derived fields (head_dim and kin) are recomputed and validated.
"""

from __future__ import annotations

from typing import Any

from conformance.models.shrink_joins import (backbone_outputs, feature_sizes_follow_image_size, follow_widths,
                                             layer_indices_follow_layers, merged_widths_follow, patch_query_counts,
                                             pinpoints_follow_image_size, pooled_image_tokens,
                                             stem_width_follows_stages, wide_rotary_follows_heads)
from conformance.models.shrink_layers import kept_layers, layer_indices_follow_kept

# Tiny sizes. A rule only ever shrinks a default (min), so small defaults stay.
VOCAB = 128
SIZE_RULES: dict[str, int] = {
    **dict.fromkeys(("hidden_size", "d_model", "n_embd", "dim", "embed_dim", "embedding_size",
                     "word_embed_proj_dim", "projection_dim",
                     # a vision tower's output width must be the text model's hidden size
                     "out_hidden_size", "text_hidden_size"), 32),
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
                     "decoder_attention_heads", "num_decoder_attention_heads",
                     "num_sliding_attention_heads"), 4),
    **dict.fromkeys(("intermediate_size", "ffn_dim", "n_inner", "d_ff", "encoder_ffn_dim", "decoder_ffn_dim",
                     "hidden_dim", "ffn_hidden_size", "mlp_dim", "intermediate_dim"), 64),
    **dict.fromkeys(("moe_intermediate_size", "shared_expert_intermediate_size", "expert_intermediate_size"), 32),
    **dict.fromkeys(("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers",
                     "decoder_layers", "num_decoder_layers", "num_encoder_layers"), 2),
    **dict.fromkeys(("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts"), 4),
    **dict.fromkeys(("num_experts_per_tok", "moe_topk", "moe_k", "top_k", "num_selected_experts",
                     "num_experts_per_token"), 2),
    "num_key_value_heads": 2,
    # A linear-attention layer's own heads (gated DeltaNet, KDA): GLM-5-Next's 64 heads of 128 kept
    # its tiny backward's intermediates at 13 GB, past what rule 6 can keep to replay
    **dict.fromkeys(("linear_num_heads", "linear_num_key_heads", "linear_num_value_heads"), 4),
    **dict.fromkeys(("linear_head_dim", "linear_key_head_dim", "linear_value_head_dim"), 8),
    "n_shared_experts": 1,
    "vocab_size": VOCAB,
    "encoder_hash_byte_group_vocab": VOCAB,  # BLT's hashed n-gram embeddings (500k rows by default)
    # Gemma 3n/4's per-layer embeddings: 262k rows x layers x width kept a "tiny" model at 134 M
    # parameters, and its backward past 11 GB
    "vocab_size_per_layer_input": VOCAB,
    "max_position_embeddings": 512,
    "kv_lora_rank": 16,
    "q_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 8,
    "rotary_dim": 4,
    "image_size": 32,
    "patch_size": 8,
    "num_channels": 3,
    # detection heads pick their top queries among the feature-map cells of a tiny image
    "num_queries": 8,
    # a video model's clip; tubelets of 2 frames still fit
    "num_frames": 4,
}
# Sizes a default config may leave to the checkpoint (None), which the modules need: the
# vocabulary (ESM, its embeddings), the forecast
# horizon of time-series transformers (their context length defaults to it).
LEFT_TO_CHECKPOINT = {"vocab_size": VOCAB, "prediction_length": 4}
PER_LAYER_SUFFIX = "_per_layer"
# Image (and video) placeholder tokens a vision-language config may leave to the checkpoint.
IMAGE_PLACEHOLDER_KEYS = ("image_token_index", "image_token_id", "video_token_index", "video_token_id")
# Expert counts an MoE config may leave at None (its modeling code then fails).
MOE_COUNT_KEYS = frozenset({"num_experts", "n_routed_experts", "num_local_experts", "num_experts_per_tok",
                            "n_shared_experts"})
# State-space head layouts: (heads, head dim, expand factor, groups) as each family names them.
MAMBA_HEAD_KEYS = (("mamba_n_heads", "mamba_d_head", "mamba_expand", "mamba_n_groups"),
                   ("num_heads", "head_dim", "expand", "n_groups"))



def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_config(value: Any) -> bool:
    from transformers import PreTrainedConfig

    return isinstance(value, PreTrainedConfig)


class _TokenIds:
    """Maps special-token ids beyond the tiny vocabulary to distinct ids at its top."""

    def __init__(self) -> None:
        self.mapping: dict[int, int] = {}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, bool) or not isinstance(value, int) or value < VOCAB:
            return value
        if value not in self.mapping:
            self.mapping[value] = VOCAB - 1 - len(self.mapping)
        return self.mapping[value]

    def fresh(self, name: str) -> int:
        """A distinct id at the top of the tiny vocabulary for a token the checkpoint names (None)."""
        return self(VOCAB + len(self.mapping) + sum(map(ord, name)) * 1000)


def _is_token_key(key: str) -> bool:
    return key.endswith(("_token_id", "_token_index", "_token_ids")) or key in ("image_token_index",)


def _limited(key: str, value: Any) -> Any:
    """`value` under the SIZE_RULES limit of `key`; lists of sizes (per layer) element by element."""
    limit = SIZE_RULES.get(key.removesuffix(PER_LAYER_SUFFIX))  # `num_key_value_heads_per_layer` too
    if limit is None:
        return value
    if isinstance(value, list):
        return [_limited(key, v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and value > limit:
        return limit
    return value


def _per_layer(values: dict[str, Any]) -> dict[str, Any]:
    """Per-layer fields cut to the kept layers: every list as long as the layer count (layer
    kinds, per-layer sizes, sparsity patterns) and `per_layer_config` keyed by layer index."""
    found = kept_layers(values)
    if found is None:
        return {}
    count_key, total, kept = found
    out: dict[str, Any] = {count_key: len(kept)}
    for key, value in values.items():
        # (`target_layer_ids` name another model's layers, however many there are of them)
        if isinstance(value, list) and len(value) == total and key != count_key and not key.endswith("_layer_ids"):
            out[key] = _limited(key, [value[i] for i in kept])
    out.update(layer_indices_follow_kept(values, total, kept))
    shared = values.get("num_kv_shared_layers")
    if isinstance(shared, int) and shared:
        # layers that reuse an earlier layer's KV cache: all of them (a draft model) or none
        out["num_kv_shared_layers"] = len(kept) if shared >= total else 0
    per_layer = values.get("per_layer_config")
    if isinstance(per_layer, dict) and per_layer:
        by_index = {int(k): v for k, v in per_layer.items()}
        out["per_layer_config"] = {new: _shrunk_layer(by_index[old]) for new, old in enumerate(kept)
                                   if old in by_index}
    return out


def _shrunk_layer(overrides: dict[str, Any]) -> dict[str, Any]:
    """One layer's own sizes (per_layer_config), shrunk like the model's; a distinct head_dim stays
    distinct but small."""
    out = {key: _limited(key, value) for key, value in overrides.items()}
    if overrides.get("num_key_value_heads") == overrides.get("num_attention_heads") != None:  # noqa: E711
        out["num_key_value_heads"] = out["num_attention_heads"]  # plain multi-head stays plain
    if isinstance(out.get("head_dim"), int):
        out["head_dim"] = min(out["head_dim"], 32)  # above the shrunk global one (<= 16)
    return out


def _is_moe(values: dict[str, Any]) -> bool:
    return isinstance(values.get("moe_intermediate_size"), int)


def shrink(config: Any, token_ids: _TokenIds | None = None) -> dict[str, Any]:
    """Constructor kwargs that rebuild `config` tiny: only the keys that change, recursively."""
    token_ids = token_ids or _TokenIds()
    values = config.to_dict()
    out: dict[str, Any] = {}
    for key, limit in SIZE_RULES.items():
        value = values.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            out[key] = limit
        elif value is None and key in values and key in MOE_COUNT_KEYS and _is_moe(values):
            out[key] = limit  # an MoE config whose expert counts default to None cannot build
        elif key == "image_size" and isinstance(value, list) and len(value) == 2 \
                and all(_is_size(v) for v in value) and max(value) > limit:
            out[key] = [min(v, limit) for v in value]  # (height, width)
    for key, size in LEFT_TO_CHECKPOINT.items():
        if key in values and values[key] is None:
            out[key] = size
    image, patch = out.get("image_size", values.get("image_size")), out.get("patch_size", values.get("patch_size"))
    if isinstance(values.get("image_embedding_size"), int) and isinstance(image, int) and isinstance(patch, int):
        out["image_embedding_size"] = max(1, image // patch)  # the patch grid a prompt encoder (SAM) matches
    if isinstance(values.get("global_attn_indexes"), list) and "num_hidden_layers" in out:
        out["global_attn_indexes"] = [out["num_hidden_layers"] - 1]  # windowed ViTs keep one global layer
    heads = out.get("num_attention_heads", values.get("num_attention_heads"))
    hidden = out.get("hidden_size", values.get("hidden_size"))
    if "head_dim" in values and isinstance(heads, int) and isinstance(hidden, int):
        # None too: some attention modules read config.head_dim without a fallback; partial
        # rotary embeddings must still rotate a multiple of 4 dims
        out["head_dim"] = max(hidden // heads, 4, _min_rotary_head_dim(values))
    kv_owners = [out.get(k, values.get(k)) for k in ("num_attention_heads", "num_heads")]
    kv_owners = [h for h in kv_owners if isinstance(h, int) and not isinstance(h, bool) and h > 0]
    if isinstance(values.get("d_kv"), int) and "hidden_size" in out and kv_owners:
        # per-head width of T5-style attention whose projections are hidden_size wide (Pix2Struct)
        out["d_kv"] = max(out["hidden_size"] // kv_owners[0], 4)
    kv_heads = values.get("num_key_value_heads")
    if isinstance(heads, int) and "num_key_value_heads" in values:
        # plain multi-head attention (and MLA, which requires it) keeps kv heads == heads
        plain = kv_heads is None or kv_heads == values.get("num_attention_heads") or "kv_lora_rank" in values
        out["num_key_value_heads"] = heads if plain else min(kv_heads, 2, heads)
    for group_key in ("n_group", "num_expert_group"):
        if isinstance(values.get(group_key), int) and values[group_key] > 2:
            # grouped routing: experts split evenly into groups, top-k groups cover top-k experts
            out[group_key] = 2
            if isinstance(values.get("topk_group"), int):
                out["topk_group"] = min(values["topk_group"], 2)
    out.update(_mamba_heads(values, {**values, **out}))
    out.update(_mrope(values, out.get("head_dim") or (hidden // heads if isinstance(heads, int) and
                                                        isinstance(hidden, int) else None)))
    out.update(_per_layer(values))
    for key in ("num_heads", "num_attention_heads"):
        if isinstance(values.get(key), list) and all(isinstance(v, int) for v in values[key]):
            # per-stage heads (Swin-like): powers of two divide every shrunk stage width
            out[key] = [min(v, 2) for v in out.get(key, values[key])]
    out.update(_attention_layers(values))
    if isinstance(values.get("window_size"), int) and isinstance(values.get("depths"), list):
        # hierarchical windowed vision models (Swin): windows no larger than a tiny stage's grid
        out["window_size"] = min(values["window_size"], 4)
    if "default_language" in values and values["default_language"] is None and values.get("languages"):
        out["default_language"] = values["languages"][0]  # language adapters (X-MOD) need one chosen
    if values.get("use_timm_backbone"):
        # Transformers' own backbone (its default config, random weights) in place of a timm one
        out.update(use_timm_backbone=False, use_pretrained_backbone=False)
    for key in IMAGE_PLACEHOLDER_KEYS:
        if key in values and values[key] is None and "vision_config" in values:
            out[key] = token_ids.fresh(key)  # image placeholders left to the checkpoint (InstructBLIP)
    for key, value in values.items():
        if _is_token_key(key) and value is not None:
            mapped = token_ids(value)
            if mapped != value:
                out[key] = mapped
    for key in values:
        value = vars(config).get(key)  # the stored field: to_dict() already made it a list
        if isinstance(value, tuple) and key not in out and value and all(isinstance(v, int) for v in value):
            out[key] = list(value)  # some modeling code concatenates a default tuple to a list
    originals: dict[str, dict[str, Any]] = {}
    for key in getattr(config, "sub_configs", {}) or {}:
        sub = getattr(config, key, None)
        if _is_config(sub) and getattr(sub, "model_type", None) == "timm_backbone":
            out[key] = _resnet_for_timm(sub)
            out.update(_inputs_from_resnet(values, out[key]))
        elif _is_config(sub):
            originals[key] = sub.to_dict()
            out[key] = {**originals[key], **shrink(sub, token_ids)}
    follow_widths(values, out, originals)
    out.update(merged_widths_follow(values, out, originals))
    out.update(feature_sizes_follow_image_size(values, out, originals))
    out.update(layer_indices_follow_layers(values, out))
    out.update(pooled_image_tokens(values, out))
    out.update(patch_query_counts(values, out))
    out.update(pinpoints_follow_image_size(values, out))
    out.update(stem_width_follows_stages(values, out))
    out.update(wide_rotary_follows_heads(values, out))
    _default_mrope(values, out)
    if _text_part_of_merged_grid_model(config):
        out.update(_mrope_sections({**values, **out}))
    out.update(backbone_outputs(values, out, _limited))
    return out


def _resnet_for_timm(timm_config: Any) -> dict[str, Any]:
    """A tiny Transformers ResNet with the timm backbone's stages in place of timm (an optional
    dependency whose backbones are named checkpoints)."""
    indices = list(getattr(timm_config, "out_indices", None) or [1, 2, 3, 4])
    return {"model_type": "resnet", "embedding_size": 16, "hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1],
            "layer_type": "bottleneck", "num_channels": getattr(timm_config, "num_channels", 3),
            "out_indices": [i for i in indices if 1 <= i <= 4] or [4]}


def _inputs_from_resnet(values: dict[str, Any], resnet: dict[str, Any]) -> dict[str, Any]:
    """Per-level input widths of the part fed by a replaced timm backbone (OmDet-Turbo's
    `encoder_in_channels`) are the tiny ResNet's stage widths at its outputs."""
    widths = [resnet["hidden_sizes"][i - 1] for i in resnet["out_indices"]]
    return {key: widths for key, value in values.items()
            if key.endswith("in_channels") and isinstance(value, list) and len(value) == len(widths)}


def _default_mrope(values: dict[str, Any], out: dict[str, Any]) -> None:
    """Vision-language models with merged patch grids (Qwen2-VL, GLM-4V and kin) use multimodal
    RoPE whose sections, when the config leaves them out, default in the modeling code to a
    full-size head; spell them out for the tiny head."""
    text, vision = out.get("text_config"), values.get("vision_config")
    if not isinstance(text, dict) or not isinstance(vision, dict) or "spatial_merge_size" not in vision:
        return
    text.update(_mrope_sections(text))


def _mrope_sections(text: dict[str, Any]) -> dict[str, Any]:
    """rope_parameters with (time, height, width) sections over the rotary half of a tiny head."""
    rope = text.get("rope_parameters")
    if not isinstance(rope, dict) or "mrope_section" in rope:
        return {}
    kinds = text.get("layer_types")
    if not rope and isinstance(kinds, list) and kinds:
        # an empty default whose rotary embedding is looked up by layer type (Cohere Compass):
        # each kind gets default RoPE, with its sections
        rope = {kind: {"rope_type": "default", "rope_theta": text.get("rope_theta") or 10000.0} for kind in kinds}
    head_dim = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]

    def sectioned(params: dict[str, Any]) -> dict[str, Any]:
        factor = params.get("partial_rotary_factor") or text.get("partial_rotary_factor") or 1.0
        half = int(head_dim * factor) // 2
        return {**params, "mrope_section": [half - 2 * (half // 4), half // 4, half // 4]}

    if rope and all(isinstance(v, dict) for v in rope.values()):  # per layer type
        return {"rope_parameters": {kind: sectioned(params) for kind, params in rope.items()}}
    return {"rope_parameters": sectioned(rope)}


def _text_part_of_merged_grid_model(config: Any) -> bool:
    """A text config ("qwen2_vl_text") whose model ("qwen2_vl") merges patch grids: its RoPE is
    multimodal even though the text config alone does not say so."""
    from transformers.models.auto import configuration_auto

    model_type = getattr(config, "model_type", "") or ""
    if not model_type.endswith("_text"):
        return False
    parent = configuration_auto.CONFIG_MAPPING_NAMES.get(model_type[: -len("_text")])
    try:
        import transformers

        vision = getattr(getattr(transformers, parent)(), "vision_config", None) if parent else None
    except Exception:  # noqa: BLE001 - a parent that cannot be built says nothing
        return False
    return vision is not None and hasattr(vision, "spatial_merge_size")


def _min_rotary_head_dim(values: dict[str, Any]) -> int:
    """The smallest head dim whose rotary part (partial_rotary_factor, top level or per layer
    type in rope_parameters) is at least 4 dims."""
    factors = [values.get("partial_rotary_factor")]
    rope = values.get("rope_parameters")
    if isinstance(rope, dict):
        factors += [rope.get("partial_rotary_factor")] + [
            v.get("partial_rotary_factor") for v in rope.values() if isinstance(v, dict)]
    factors = [f for f in factors if isinstance(f, float) and 0 < f < 1]
    return int(4 / min(factors)) if factors else 0


def _mrope(values: dict[str, Any], head_dim: int | None) -> dict[str, Any]:
    """Multimodal RoPE splits half the head dim into (time, height, width) sections; scale them
    to the tiny head dim, each at least 1, keeping their sum exact."""
    rope = values.get("rope_parameters")
    sections = rope.get("mrope_section") if isinstance(rope, dict) else None
    if not isinstance(head_dim, int) or not isinstance(sections, list) or not sections:
        return {}
    half, total = head_dim // 2, sum(sections)
    if total == half or half < len(sections):
        return {}
    scaled = [max(1, v * half // total) for v in sections]
    # the rounding remainder goes to a section no other equals: equal sections (ERNIE-VL's height
    # and width, stacked pairwise) stay equal
    unique = next((i for i, v in enumerate(sections) if sections.count(v) == 1), 0)
    scaled[unique] += half - sum(scaled)
    return {"rope_parameters": {**rope, "mrope_section": scaled}}


def _attention_layers(values: dict[str, Any]) -> dict[str, Any]:
    """Hybrids that place attention by index or period keep one attention layer (the second)
    among the tiny model's layers; with none, their cache cannot even report its length."""
    out: dict[str, Any] = {}
    if "attn_layer_indices" in values:  # None (bamba's default) means no attention at all
        out["attn_layer_indices"] = [1]
    if isinstance(values.get("attn_layer_offset"), int) and isinstance(values.get("attn_layer_period"), int):
        out.update(attn_layer_offset=1, attn_layer_period=2)
    return out


def _mamba_heads(values: dict[str, Any], shrunk: dict[str, Any]) -> dict[str, Any]:
    """State-space heads must tile the expanded hidden size: heads * head_dim == expand * hidden."""
    hidden = shrunk.get("hidden_size")
    for heads_key, dim_key, expand_key, groups_key in MAMBA_HEAD_KEYS:
        if not all(isinstance(values.get(k), int) for k in (heads_key, dim_key, expand_key)):
            continue
        heads = min(values[heads_key], 4)
        out = {heads_key: heads, dim_key: max(values[expand_key] * hidden // heads, 1)}
        if isinstance(values.get(groups_key), int):
            out[groups_key] = min(values[groups_key], heads)
        if isinstance(values.get("mamba_d_ssm"), int):  # falcon_h1 names the product too
            out["mamba_d_ssm"] = heads * out[dim_key]
        return out
    return {}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


