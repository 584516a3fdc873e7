"""Input rules for vision-language models whose images go in by an idiom of their own: a head
wrapping a whole VLM, optional towers left out, image boundary tokens, patch masks that are not
image slots, bare tubelets, (h, w) grids, per-layer features and index-pooled crops."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from op_db.records import Status, WorkItem

# Types these rules first made run, one per rule, the cheapest of each.
NEWLY_RUNNING = [
    "colpali",  # a retrieval head around a whole VLM gets that VLM's inputs
    "embedding_gemma2",  # optional towers left out: text alone
    "ovis2_5",  # placeholders between image start/end tokens
    "molmo2",  # one crop per image pooled into one token by index
]


def test_image_bounds_need_both_ids():
    from conformance.models.vision_features import image_bounds, with_image_tokens

    assert image_bounds(SimpleNamespace(image_start_token_id=5, image_end_token_id=6)) == (5, 6)
    assert image_bounds(SimpleNamespace(image_start_token_id=5)) == ()
    import torch

    ids = with_image_tokens(torch.tensor([[1, 2]]), 9, 2, (5, 6))
    assert ids.tolist() == [[1, 5, 9, 9, 6, 2]]


def test_left_out_towers_drop_their_inputs_only_beside_text():
    from conformance.models.modalities import towerless

    config = SimpleNamespace(sub_configs={"vision_config": None, "audio_config": None, "text_config": None},
                             vision_config=None, audio_config=SimpleNamespace())
    names = ["input_ids", "pixel_values", "input_features"]
    assert towerless(config, names) == ["input_ids", "input_features"]
    assert towerless(config, ["pixel_values"]) == ["pixel_values"]


def test_a_mask_over_image_patches_is_not_an_image_slot():
    import transformers

    from conformance.models.image_slots import takes_image_slots

    assert not takes_image_slots(SimpleNamespace(forward=transformers.FlavaModel.forward))
    assert takes_image_slots(SimpleNamespace(forward=transformers.IdeficsForVisionText2Text.forward))


@pytest.mark.parametrize("subject", NEWLY_RUNNING)
def test_newly_running_types_pass_on_a_fault_free_sim(models_ctx, use_profile, subject):
    from conformance.models import runner

    result = runner.run_item(WorkItem("model", subject, "forward", "float32", "eager"), models_ctx)
    assert result.status is Status.PASS, result.message
    assert result.aten_ops
