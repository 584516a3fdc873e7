"""Rules for models that read what another model computed or what another layer stored: K/V
shared between layers (kept in pairs when a stack shrinks), a draft model's target K/V and
hidden states, text aligned with audio frames, video placeholders; then the types they made
build, passing on a fault-free sim."""

from __future__ import annotations

import pytest

from op_db.records import Status, WorkItem

# Types these rules first made build and run, one per rule.
NEWLY_RUNNING = [
    "kolibri1_1",  # a K/V-sharing layer pair survives the layer cut, layer indices renumbered
    "gemma4_assistant",  # a draft model's target K/V and embeddings
    "muse_glimmer_assistant",  # documented `dim * len(config.target_layer_ids)` widths
    "voxtral_realtime:base",  # one token per audio frame
    "instructblipvideo",  # video placeholders measured through get_video_features
]


def run(ctx, subject):
    from conformance.models import runner

    return runner.run_item(WorkItem("model", subject, "forward", "float32", "eager"), ctx)


def test_a_layer_reading_another_layers_kv_is_kept_with_it_and_renumbered():
    from conformance.models.shrink_layers import kept_layers, layer_indices_follow_kept

    kinds = ["sliding", "sliding", "indexed", "sliding", "indexed", "indexed"]
    values = {"num_hidden_layers": 6, "layer_types": kinds, "kv_source_layers": [0, 1, 2, 3, 2, 5],
              "index_layers": [2, 5], "mlp_only_layers": [0, 1], "target_layer_ids": [1, 3, 5]}
    count_key, total, kept = kept_layers(values)
    assert (count_key, total, kept) == ("num_hidden_layers", 6, [0, 2, 4])  # layer 4 reads 2: both kept
    assert layer_indices_follow_kept(values, total, kept) == {
        "kv_source_layers": [0, 1, 1], "index_layers": [1], "mlp_only_layers": [0]}


def test_documented_dimensions_may_be_sums_products_and_list_lengths():
    from conformance.models.documented import _size

    class Config:
        hidden_size, block_size, target_layer_ids, sub_configs = 32, 4, [1, 13, 25], {}

    assert _size("dim * len(config.target_layer_ids)", Config(), 8) == 96
    assert _size("number_of_previous_accepted_tokens + config.block_size", Config(), 8) == 12


@pytest.mark.parametrize("subject", NEWLY_RUNNING)
def test_newly_running_types_pass_on_a_fault_free_sim(models_ctx, use_profile, subject):
    result = run(models_ctx, subject)
    assert result.status is Status.PASS, result.message
    assert result.aten_ops
