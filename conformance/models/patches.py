"""Layouts of flattened-patch image inputs with a (t, h, w) grid per image.

Vision towers that take patches rather than whole images (Qwen2-VL and its many descendants)
agree on the grid but not on how the patch tensor is laid out: one row per patch, one
(C, P, P) image per patch, a leading batch of patch sequences, or pixel rows in merge-block
order. The same random patches are offered in each layout, and the caller keeps the first
one the model's own code accepts (the layout is measured, not derived, as for image tokens).
"""

from __future__ import annotations

import inspect
from typing import Any

from conformance.models.tokens import BATCH, _generator


# Names a config gives its temporal patch depth and its merge window.
TEMPORAL_KEYS = ("temporal_patch_size", "patch_temporal")
MERGE_KEYS = ("spatial_merge_size", "merge_size", "merge_kernel_size", "window_kernel_size")


def _first_int(config: Any, keys: tuple[str, ...], default: int) -> int:
    for key in keys:
        value = getattr(config, key, None)
        if isinstance(value, (list, tuple)) and value:
            value = value[0]
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def merge_size(vision: Any) -> int:
    return _first_int(vision, MERGE_KEYS, 1)


def flat_patches(vision: Any, seed: int, batch: int = BATCH):
    """(patch rows, grid): one frame per image, patches per side a multiple of the merge window;
    each row is channels x temporal x patch x patch wide."""
    import torch

    patch = _first_int(vision, ("patch_size",), 8)
    temporal = _first_int(vision, TEMPORAL_KEYS, 1)
    channels = _first_int(vision, ("in_channels", "num_channels"), 3)
    side = 2 * merge_size(vision)
    rows = torch.randn((batch * side * side, channels * temporal * patch * patch), generator=_generator(seed + 1))
    return rows, torch.tensor([[1, side, side]] * batch)


def patch_layouts(vision: Any, seed: int, batch: int = BATCH) -> list[tuple[Any, Any]]:
    """(patches, grid) pairs, the same patches in each layout, most common first: a row per patch;
    a (C, P, P) image per patch (Kimi-K2.5), a batch of one such sequence (PaddleOCR-VL); a row or a
    channels-last image per merged token with the grid counted in merged tokens (Inkling2)."""
    rows, grid = flat_patches(vision, seed, batch)
    temporal = _first_int(vision, TEMPORAL_KEYS, 1)
    patch = _first_int(vision, ("patch_size",), 8)
    channels = rows.shape[-1] // (temporal * patch * patch)
    count = rows.shape[0]
    images = rows.reshape(count, channels, temporal, patch, patch)
    per_patch = images[:, :, 0] if temporal == 1 else images
    # the grid counted in merged tokens: a row per token, or its (mP, mP, C) pixels (Inkling2)
    merge = merge_size(vision)
    tokens = grid // grid.new_tensor([1, merge, merge])
    token_pixels = per_patch[:, :, 0] if temporal > 1 else per_patch
    token_pixels = token_pixels.reshape(count // merge ** 2, merge, merge, channels, patch, patch) \
        .permute(0, 1, 4, 2, 5, 3).reshape(count // merge ** 2, merge * patch, merge * patch, channels)
    return [(rows, grid), (per_patch, grid), (per_patch.unsqueeze(0), grid),
            (rows.reshape(count // merge ** 2, -1), tokens), (token_pixels, tokens)]


def tubelets(vision: Any, seed: int, batch: int = BATCH) -> list[Any]:
    """The patches of `flat_patches` as one (T, P, P, C) channels-last tubelet each, then as
    (C, T, P, P), for towers that take bare tubelets with no grid (Inkling folds them itself)."""
    rows, _ = flat_patches(vision, seed, batch)
    temporal = _first_int(vision, TEMPORAL_KEYS, 1)
    patch = _first_int(vision, ("patch_size",), 8)
    first = rows.reshape(rows.shape[0], -1, temporal, patch, patch)
    return [first.permute(0, 2, 3, 4, 1).contiguous(), first]


def pooled_crops(vision: Any, seed: int, batch: int = BATCH) -> dict[str, Any]:
    """Crop inputs of towers that pool patches into tokens by index (Molmo2): one crop of patch rows
    per image, its (low-res h, w, high-res h, w) token grid and each token's patch indices, here
    one token pooling every patch of its image."""
    import torch

    patch = _first_int(vision, ("patch_size",), 8)
    channels = _first_int(vision, ("in_channels", "num_channels"), 3)
    side = _first_int(vision, ("image_size",), 32) // patch
    rows = torch.randn((batch, side * side, channels * patch * patch), generator=_generator(seed + 1))
    return {"pixel_values": rows, "image_grids": torch.tensor([[1, 1, 0, 0]] * batch),
            "image_token_pooling": torch.arange(side * side).repeat(batch, 1),
            "image_num_crops": torch.ones(batch, dtype=torch.long)}


def merge_sizes(vision: Any, batch: int = BATCH):
    """Each image's merge window, for towers that take it per image (VideoLLaMA 3)."""
    import torch

    return torch.tensor([merge_size(vision)] * batch)


def naflex_patches(vision: Any, seed: int, batch: int = BATCH, with_mask: bool = True) -> dict[str, Any]:
    """NaFlex inputs (Siglip2 and the models built on it): each image's patch rows padded to one
    length, its patch grid shape, and the mask of real patches (all real here)."""
    import torch

    rows, grid = flat_patches(vision, seed, batch)
    side = int(grid[0, 1])
    out = {"pixel_values": rows.reshape(batch, side * side, -1), "spatial_shapes": grid[:, 1:]}
    if with_mask:
        out["pixel_attention_mask"] = torch.ones((batch, side * side), dtype=torch.long)
    return out


def positioned_patches(vision: Any, seed: int, batch: int = BATCH) -> tuple[Any, Any]:
    """(patch rows (batch, patches, C x P x P), their (x, y) positions (batch, patches, 2)) for
    towers that pool k x k patches and read each patch's position (Gemma 4): a square grid of
    2k x 2k patches per image, none of them padding."""
    import torch

    patch = _first_int(vision, ("patch_size",), 8)
    channels = _first_int(vision, ("in_channels", "num_channels"), 3)
    side = 2 * _first_int(vision, ("pooling_kernel_size",), 1)
    rows = torch.randn((batch, side * side, channels * patch * patch), generator=_generator(seed + 1))
    ys, xs = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    positions = torch.stack([xs.flatten(), ys.flatten()], dim=-1)
    return rows, positions.unsqueeze(0).repeat(batch, 1, 1)


def packed_strip(vision: Any, seed: int, batch: int = BATCH) -> dict[str, Any]:
    """Every image's patches side by side in one P-high strip, (1, C, P, patches x P), with each
    image's patch grid (MiniCPM-V towers, which embed the strip with one conv)."""
    rows, grid = flat_patches(vision, seed, batch)
    patch = _first_int(vision, ("patch_size",), 8)
    count = rows.shape[0]
    strip = rows.reshape(count, -1, patch, patch).permute(1, 2, 0, 3).reshape(1, -1, patch, count * patch)
    return {"pixel_values": strip, "target_sizes": grid[:, 1:]}


def tower_patch_inputs(model: Any, params: dict[str, inspect.Parameter], seed: int) -> dict[str, Any]:
    """Flattened-patch inputs of a vision tower, or {} for a forward that takes whole images:
    a (t, h, w) grid per image (the layout the tower accepts), a packed strip (MiniCPM-V), positioned
    patches (Gemma 4), or NaFlex patches (Siglip2) with their per-image shape and mask."""
    main = next((k for k in ("pixel_values", "hidden_states") if k in params), None)
    grid_key = next((k for k in ("grid_thw", "image_grid_thw") if k in params), None)
    if main is None:
        return {}
    if grid_key is not None:
        extra = {"merge_sizes": merge_sizes(model.config)} if "merge_sizes" in params else {}
        layouts = [{main: patches, grid_key: grid, **extra} for patches, grid in patch_layouts(model.config, seed)]
        return next((c for c in layouts if accepted(model, c)), layouts[0])
    if "target_sizes" in params and main == "pixel_values":
        return packed_strip(model.config, seed)
    if "pixel_position_ids" in params and main == "pixel_values":
        rows, positions = positioned_patches(model.config, seed)
        return {main: rows, "pixel_position_ids": positions}
    if "spatial_shapes" in params and main == "pixel_values":
        return naflex_patches(model.config, seed, with_mask="pixel_attention_mask" in params)
    return {}


def accepted(model: Any, inputs: dict[str, Any]) -> bool:
    """Whether the model's forward runs on `inputs` (a layout is chosen by trying it)."""
    import torch

    try:
        with torch.no_grad():
            model(**inputs)
    except Exception:  # noqa: BLE001 - not this layout
        return False
    return True
