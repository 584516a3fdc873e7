"""Shrink rules for the fields that join a model's parts, and the input layouts measured against
the model's own code: each rule on a config made for it, then the types it made build, passing
on a fault-free sim, with an injected fault caught."""

from __future__ import annotations

import pytest

from op_db.records import Status, WorkItem

# Types the join rules and input layouts below first made build and run, one per rule or layout.
NEWLY_RUNNING = [
    "rt_detr",  # per-level decoder widths follow the encoder width
    "sam2_hiera_det_model",  # per-stage widths and (h, w) image sizes
    "depth_pro",  # hidden-state hook ids clamp into the tiny tower
    "kimi_k25",  # one (C, P, P) image per grid patch
    "inkling2",  # a channels-last image per merged token
    "lfm2_vl",  # NaFlex patches for a vision-language model
    "instructblip",  # a Q-Former prompt beside the image, an image placeholder id
    "kosmos-2",  # image slots marked by a position mask
    "pix2struct",  # flattened patches with their places
    "vibevoice_acoustic_tokenizer_encoder",  # a codec half's waveform
]


def run(ctx, subject):
    from conformance.models import runner

    return runner.run_item(WorkItem("model", subject, "forward", "float32", "eager"), ctx)


def test_per_level_width_lists_follow_the_width_they_equalled():
    from conformance.models.shrink_joins import follow_widths

    values = {"d_model": 256, "decoder_in_channels": [256, 256, 256], "encoder_in_channels": [512, 1024, 2048]}
    out = {"d_model": 32, "decoder_in_channels": [256, 256, 256]}  # a default tuple made a list counts as unshrunk
    follow_widths(values, out, {})
    assert out["decoder_in_channels"] == [32, 32, 32]
    assert "encoder_in_channels" not in out  # not the width of anything shrunk: left alone


def test_stage_widths_scale_with_their_own_part_only():
    from conformance.models.shrink_joins import follow_widths

    values = {"hidden_size": 96, "embed_dim_per_stage": [96, 192, 384, 768], "num_attention_heads_per_stage": [1, 2]}
    out = {"hidden_size": 32}
    follow_widths(values, out, {})
    assert out["embed_dim_per_stage"] == [32, 64, 128, 256]
    assert "num_attention_heads_per_stage" not in out

    # a detector's d_model shrinking says nothing about its backbone's stage widths
    backbone = {"embedding_size": 64, "hidden_sizes": [256, 512, 1024, 2048]}
    out = {"d_model": 32, "backbone_config": dict(backbone)}
    follow_widths({"d_model": 256}, out, {"backbone_config": backbone})
    assert out["backbone_config"]["hidden_sizes"] == [256, 512, 1024, 2048]


def test_neck_feature_sizes_follow_the_backbone_image_size():
    from conformance.models.shrink_joins import feature_sizes_follow_image_size

    values = {"backbone_feature_sizes": [[256, 256], [128, 128], [64, 64]]}
    fixes = feature_sizes_follow_image_size(values, {"backbone_config": {"image_size": [32, 32]}},
                                            {"backbone_config": {"image_size": [1024, 1024]}})
    assert fixes == {"backbone_feature_sizes": [[8, 8], [4, 4], [2, 2]]}


@pytest.mark.parametrize(("values", "out", "expected"), [
    # VipLlava: indices from the end and the start, clamped into a 2-layer tower, repeats kept
    ({"vision_feature_layer": [-2, -5, -8, 6]}, {"vision_config": {"num_hidden_layers": 2}},
     {"vision_feature_layer": [-2, -2, -2, 1]}),
    # Molmo2: the adapter sub-config indexes the sibling vision tower
    ({}, {"vision_config": {"num_hidden_layers": 2}, "adapter_config": {"vision_feature_layer": [24, 18]}},
     {"adapter_config": {"vision_feature_layer": [1, 1]}}),
    # DPT picks layers as a set: one tiny layer per index instead of clamping them together
    ({"num_hidden_layers": 12, "backbone_out_indices": [2, 5, 8, 11]}, {"num_hidden_layers": 2},
     {"num_hidden_layers": 4, "backbone_out_indices": [0, 1, 2, 3]}),
])
def test_layer_indices_follow_the_tiny_tower(values, out, expected):
    from conformance.models.shrink_joins import layer_indices_follow_layers

    assert layer_indices_follow_layers(values, out) == expected


def test_merged_token_width_and_patch_query_table_follow_the_tower():
    from conformance.models.shrink_joins import merged_widths_follow, patch_query_counts

    fixes = merged_widths_follow({"out_hidden_size": 6144}, {"vision_config": {"hidden_size": 32}},
                                 {"vision_config": {"hidden_size": 1536, "merge_size": 2}})
    assert fixes == {"out_hidden_size": 128}
    table = patch_query_counts({"projector_patch_to_query_dict": {1225: 128, 4900: 256}},
                               {"vision_config": {"image_size": 32, "patch_size": 8}})
    assert table == {"projector_patch_to_query_dict": {16: 8}, "max_value_projector_patch_to_query_dict": 8}


def test_patch_layouts_hold_the_same_patches():
    import torch

    from conformance.models.patches import patch_layouts

    class Vision:
        patch_size, spatial_merge_size, num_channels = 8, 2, 3

    layouts = patch_layouts(Vision(), seed=0)
    rows, grid = layouts[0]
    assert grid.tolist() == [[1, 4, 4]] * 2 and rows.shape == (32, 192)
    for patches, layout_grid in layouts[1:3]:
        assert torch.equal(patches.reshape(32, -1), rows) and torch.equal(layout_grid, grid)
    merged_rows, tokens = layouts[3]
    assert tokens.tolist() == [[1, 2, 2]] * 2 and torch.equal(merged_rows.reshape(32, -1), rows)
    token_pixels, _ = layouts[4]
    assert token_pixels.shape == (8, 16, 16, 3)
    assert torch.equal(token_pixels[0, :8, :8].permute(2, 0, 1), rows[0].reshape(3, 8, 8))


def test_one_layer_of_each_combination_of_layer_kinds_is_kept():
    from conformance.models import zoo

    text = zoo.build_config(zoo.catalogue()["step3p7"]).text_config
    assert text.mlp_layer_types == ["dense", "sparse"]  # all layers are full attention; one sparse MLP kept


@pytest.mark.parametrize("subject", NEWLY_RUNNING)
def test_newly_running_types_pass_on_a_fault_free_sim(models_ctx, use_profile, subject):
    result = run(models_ctx, subject)
    assert result.status is Status.PASS, result.message
    assert result.aten_ops


def test_a_fault_in_a_newly_running_type_is_caught(models_ctx, use_profile):
    use_profile({"name": "gelu-scale",
                 "faults": [{"op": "aten.gelu.default", "dtype": "float32", "kind": "scale", "value": 1.05}]})
    result = run(models_ctx, "sam2_hiera_det_model")
    assert result.status is Status.MISMATCH


def test_per_layer_embedding_tables_are_tiny_too():
    # Gemma 3n's per-layer embeddings (262k rows by default) kept its "tiny" model at 134 M
    # parameters, and its backward past 11 GB: the zoo sweep's out-of-memory CRASHes.
    from conformance.models import zoo

    entry = next(e for e in zoo.pairs().values() if e.model_type == "gemma3n_text")
    model = zoo.build_model(entry, config=zoo.build_config(entry))
    assert sum(p.numel() for p in model.parameters()) < 2_000_000
