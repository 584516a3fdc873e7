"""Shrink rules for the fields that join a model's parts: each follows the tiny size of the part
it connects to, so the tiny config stays consistent (`shrink.py` applies them after the sizes).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# The widths a model's parts are joined by; a field elsewhere that equalled one (a neck's
# `reassemble_hidden_size`, a head's `audio_hidden_size`) must follow it when it shrinks.
WIDTH_KEYS = ("hidden_size", "d_model", "n_embd", "dim", "embed_dim")
WIDTH_PREFIXES = ("hidden_size_",)  # BLT's `hidden_size_global`: the width of another part
# Lists of per-stage widths by name (not head counts, image or feature-map sizes).
STAGE_WIDTH_NAME = re.compile(r"(dim|channel|hidden_size|features$)(?!.*head)")  # int `out_features`: widths, not names
WIDTH_SUFFIXES = ("hidden_size", "_dim", "_input_size", "_output_size", "projection_size", "_channels", "_groups")  # groups == width: depthwise


def follow_widths(values: dict[str, Any], out: dict[str, Any], originals: dict[str, dict[str, Any]]) -> None:
    """Fields (top level or in another sub-config) left at a sub-config's original width take its
    shrunk width: a part's input must be as wide as the part that feeds it."""
    widths: dict[int, int] = {}
    for width_key in WIDTH_KEYS:
        if isinstance(values.get(width_key), int) and isinstance(out.get(width_key), int):
            widths.setdefault(values[width_key], out[width_key])
    for old, new in _widths_of(originals, out).items():
        widths.setdefault(old, new)
    if not widths:
        return

    def follows(key: str, value: Any) -> bool:
        if not key.endswith(WIDTH_SUFFIXES) and not key.startswith(WIDTH_PREFIXES):
            return False
        if isinstance(value, list):  # per-level widths (a decoder's `decoder_in_channels`)
            return bool(value) and all(_is_width(v) and v in widths for v in value)
        return _is_width(value) and value in widths

    def followed(value: Any) -> Any:
        return [widths[v] for v in value] if isinstance(value, list) else widths[value]

    def fix(key: str, value: Any) -> Any:
        """The field's value following the shrunk widths, or None when it does not follow one."""
        if follows(key, value):
            return followed(value)
        return _stage_widths(key, value, widths)

    for key, value in values.items():
        if out.get(key, value) == value and (new := fix(key, value)) is not None:  # unshrunk (a tuple made a list counts)
            out[key] = new
    for key, original in originals.items():
        # a part's stage widths scale with its own width only (its recursive shrink): a backbone's
        # hidden_sizes follow neither the detector's d_model nor a sibling part's width
        for field, value in original.items():
            if out[key].get(field) == value and field not in WIDTH_KEYS and follows(field, value):
                out[key][field] = followed(value)
            elif field == "num_pos_feats" and isinstance(value, int) and 2 * value in widths:
                out[key][field] = widths[2 * value] // 2  # sine/Fourier features: half per axis pair


def merged_widths_follow(values: dict[str, Any], out: dict[str, Any],
                         originals: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Widths of merged vision tokens (a projector's input, merge x merge patches of the tower's
    width: Muse Glimmer's `out_hidden_size` 6144 = 2 x 2 x 1536) follow the tiny tower's width."""
    fixes: dict[str, Any] = {}
    for key, original in originals.items():
        merge = next((original[k] for k in ("spatial_merge_size", "merge_size") if _is_width(original.get(k))), None)
        old, new = original.get("hidden_size"), out[key].get("hidden_size")
        if not merge or merge < 2 or not _is_width(old) or not _is_width(new) or new >= old:
            continue
        for field, value in values.items():
            if field.endswith(WIDTH_SUFFIXES) and _is_width(value) and value == merge * merge * old:
                fixes[field] = merge * merge * new
    return fixes


def _widths_of(originals: dict[str, dict[str, Any]], out: dict[str, Any]) -> dict[int, int]:
    """original width -> shrunk width of the sub-configs in `originals`."""
    widths: dict[int, int] = {}
    for key, original in originals.items():
        for width_key in WIDTH_KEYS:
            old, new = original.get(width_key), out[key].get(width_key)
            if isinstance(old, int) and isinstance(new, int) and new < old:
                widths.setdefault(old, new)
    return widths


def _stage_widths(key: str, value: Any, widths: dict[int, int]) -> list[int] | None:
    """Per-stage widths that grow from a shrunk width (Hiera's `embed_dim_per_stage` [96, 192, ...]
    from hidden_size 96, a neck's `backbone_channel_list` in reverse) scale with it, or None."""
    if not STAGE_WIDTH_NAME.search(key) or not isinstance(value, list) or len(value) < 2 \
            or not all(_is_width(v) and v > 0 for v in value):
        return None
    base = next((v for v in value if v in widths and all(u % v == 0 for u in value)), None)
    if base is None and value[-1] in widths:
        base = value[-1]  # widths that grow to the shrunk one (EfficientLoFTR's last stage is hidden_size)
    if base is None or any(u * widths[base] % base for u in value):
        return None
    return [u * widths[base] // base for u in value]


def _is_width(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def feature_sizes_follow_image_size(values: dict[str, Any], out: dict[str, Any],
                                    originals: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Feature-map sizes a neck is told per level (SAM 2's `backbone_feature_sizes`, (h, w) pairs)
    scale with the patch grid (else the image size) of the backbone sub-config that makes them."""
    ratios = [_grid(out[key]) / _grid(original) for key, original in originals.items()
              if _grid(original) and _grid(out[key])]
    ratio = min(ratios, default=1.0)
    fixes: dict[str, Any] = {}
    for key, value in values.items():
        if ratio < 1 and key.endswith("feature_sizes") and isinstance(value, list) and value \
                and all(isinstance(pair, list) and all(_is_width(v) for v in pair) for pair in value):
            fixes[key] = [[max(1, round(v * ratio)) for v in pair] for pair in value]
    return fixes


def _grid(config: dict[str, Any]) -> float:
    """A backbone's patch-grid side (a ViT's image_size / patch_size, SAM 3's 1008 / 14), else its
    image side; 0 when unknown."""
    side, patch = _side(config.get("image_size")), config.get("patch_size")
    return side / patch if side and _is_width(patch) and patch > 0 else side


def _side(size: Any) -> int:
    """The height of an image size given as an int or an (h, w) list; 0 when unknown."""
    if isinstance(size, list) and size and _is_width(size[0]):
        return size[0]
    return size if _is_width(size) else 0


# Fields naming hidden-state layers of a tower by index (one int or a list; negative from the end).
LAYER_INDEX_KEYS = ("vision_feature_layer", "intermediate_hook_ids", "insert_layer_id")
SELECTED_LAYERS_KEY = "backbone_out_indices"
# Sub-configs whose layers such indices name, first found wins; else the config's own layers.
TOWER_KEYS = ("vision_config", "image_model_config", "backbone_config")
LAYER_COUNT_NAMES = ("num_hidden_layers", "num_layers")


def layer_indices_follow_layers(values: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """Indices of a tower's hidden states (VipLlava's `vision_feature_layer` [-2, -5, ..., 6], Depth
    Pro's `intermediate_hook_ids` [11, 5]) clamped into the tiny tower's layers, at top level or in
    a sibling sub-config (Molmo2's adapter); repeats are kept so per-index widths still add up."""
    merged = {**values, **out}
    tower = next((merged[k] for k in TOWER_KEYS if isinstance(merged.get(k), dict)), merged)
    count = next((tower[k] for k in LAYER_COUNT_NAMES if _is_width(tower.get(k))), None)
    if not count:
        return {}

    def clamped(value: Any) -> Any:
        if isinstance(value, list):
            return [clamped(v) for v in value]
        if not _is_width(value):
            return value
        return min(value, count - 1) if value >= 0 else max(value, -count)

    fixes: dict[str, Any] = {key: clamped(merged[key]) for key in LAYER_INDEX_KEYS
                             if key in merged and clamped(merged[key]) != merged[key]}
    selected = merged.get(SELECTED_LAYERS_KEY)
    if tower is merged and isinstance(selected, list) and len(set(selected)) > count:
        # layers picked as a set (DPT's neck wants one map per index): one tiny layer per index
        count_key = next(k for k in LAYER_COUNT_NAMES if _is_width(tower.get(k)))
        fixes.update({count_key: len(selected), SELECTED_LAYERS_KEY: list(range(len(selected)))})
    for name, sub in out.items():
        if isinstance(sub, dict) and name not in TOWER_KEYS:
            inner = {key: clamped(sub[key]) for key in LAYER_INDEX_KEYS if key in sub and clamped(sub[key]) != sub[key]}
            if inner:
                fixes[name] = {**sub, **inner}
    return fixes


def patch_query_counts(values: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """A projector that maps each patch count to a number of learned queries (Aria's
    `projector_patch_to_query_dict` {1225: 128, 4900: 256}) must know the tiny tower's patch count."""
    table, vision = values.get("projector_patch_to_query_dict"), out.get("vision_config")
    if not isinstance(table, dict) or not table or not isinstance(vision, dict):
        return {}
    image, patch = vision.get("image_size"), vision.get("patch_size")
    if not _is_width(image) or not _is_width(patch) or image < patch:
        return {}
    queries = min(min(int(v) for v in table.values()), 8)
    return {"projector_patch_to_query_dict": {(image // patch) ** 2: queries},
            "max_value_projector_patch_to_query_dict": queries}


def pooled_image_tokens(values: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """Models that average-pool the tiny vision grid down to `mm_tokens_per_image` tokens (Gemma 3)
    pool by patches-per-side // tokens-per-side: keep a 2x2 pool over the tiny grid."""
    vision = out.get("vision_config")
    if not isinstance(values.get("mm_tokens_per_image"), int) or not isinstance(vision, dict):
        return {}
    image, patch = vision.get("image_size"), vision.get("patch_size")
    if not isinstance(image, int) or not isinstance(patch, int) or image < patch:
        return {}
    per_side = max(1, image // patch // 2)
    return {"mm_tokens_per_image": min(values["mm_tokens_per_image"], per_side * per_side)}


def backbone_outputs(values: dict[str, Any], out: dict[str, Any],
                     limited: Callable[[str, Any], Any]) -> dict[str, Any]:
    """A backbone's output stages (out_indices, out_features) must name stages the tiny backbone
    still has: k outputs become its last k stages (the stem stays where asked), and a backbone
    cut below k stages gets k layers back (necks expect one feature map per output); `limited`
    shrinks a restored per-stage list."""
    names, indices = values.get("stage_names"), values.get("out_indices")
    if not isinstance(names, list) or not isinstance(indices, (list, tuple)) or not indices:
        return {}
    fixes: dict[str, Any] = {}
    if isinstance(values.get("depths"), (list, tuple)):
        count = len(out.get("depths", values["depths"]))
    else:
        count_key = next((k for k in ("num_hidden_layers", "num_layers", "num_stages")
                          if isinstance(values.get(k), int)), None)
        if count_key is None:
            return {}
        count = out.get(count_key, values[count_key])
    stages = [i for i in indices if i > 0]
    if max(indices) <= count:
        return {}
    if len(stages) > count and isinstance(values.get("depths"), (list, tuple)):
        # per-stage lists were cut to the kept layers: keep the first k stages instead
        total = len(values["depths"])
        for key, value in values.items():
            if isinstance(value, list) and len(value) == total:
                fixes[key] = limited(key, value[:len(stages)])
                if key in ("num_heads", "num_attention_heads"):  # as for the cut stages: powers of two
                    fixes[key] = [min(v, 2) for v in fixes[key]]
        if isinstance(values.get("num_layers"), int):
            fixes["num_layers"] = len(stages)
        count = len(stages)
    elif len(stages) > count:
        count = fixes[count_key] = len(stages)
    new = ([0] if 0 in indices else []) + list(range(max(1, count - len(stages) + 1), count + 1))
    stage_names = list(names[:1]) + [f"stage{i}" for i in range(1, count + 1)]
    fixes.update(out_indices=new, out_features=[stage_names[i] for i in new], stage_names=stage_names)
    return fixes


def pinpoints_follow_image_size(values: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """Any-resolution models (LLaVA-NeXT) tile an image at the grid pinpoint nearest its size, in
    tiles of the vision tower's image size: the pinpoints scale to whole tiny tiles."""
    pinpoints, vision = values.get("image_grid_pinpoints"), values.get("vision_config")
    new_vision = out.get("vision_config")
    if not isinstance(pinpoints, list) or not pinpoints or not isinstance(vision, dict) \
            or not isinstance(new_vision, dict):
        return {}
    old, new = vision.get("image_size"), new_vision.get("image_size")
    if not isinstance(old, int) or not isinstance(new, int) or new >= old:
        return {}
    return {"image_grid_pinpoints": [[max(1, round(side / old)) * new for side in point] for point in pinpoints]}


def stem_width_follows_stages(values: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """A hierarchical tower whose width doubles per stage (`depths`) ends at `hidden_size`: the
    first stage's width, named apart from it (CLAP's `patch_embeds_hidden_size`, 96 -> 768 over
    four stages), is the tiny hidden size halved once per tiny stage but the last."""
    depths, hidden, new_hidden = out.get("depths", values.get("depths")), values.get("hidden_size"), out.get("hidden_size")
    if not isinstance(depths, list) or not depths or not isinstance(values.get("depths"), list) \
            or not _is_width(hidden) or not _is_width(new_hidden):
        return {}
    growth, new_growth = 2 ** (len(values["depths"]) - 1), 2 ** (len(depths) - 1)
    if new_hidden % new_growth:
        return {}
    return {key: new_hidden // new_growth for key, value in values.items()
            if key not in WIDTH_KEYS and key.endswith(WIDTH_SUFFIXES) and key not in out
            and _is_width(value) and value * growth == hidden and value > new_hidden // new_growth}


def wide_rotary_follows_heads(values: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """A partial_rotary_factor above 1 sizes the rotary part by the model's width, not one head's
    (EfficientLoFTR's 2-D positions: head_dim * 4 == hidden_size / 2 at 8 heads): it keeps its
    ratio to the head count when the heads are cut."""
    rope, old = values.get("rope_parameters"), values.get("num_attention_heads")
    new = out.get("num_attention_heads", old)
    factor = rope.get("partial_rotary_factor") if isinstance(rope, dict) else None
    if not isinstance(factor, (int, float)) or factor <= 1 or not _is_width(old) or not _is_width(new) or new >= old:
        return {}
    return {"rope_parameters": {**rope, **out.get("rope_parameters", {}), "partial_rotary_factor": factor * new / old}}
