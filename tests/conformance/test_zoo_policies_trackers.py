"""Rules that made matchers, in-context segmenters, action policies and video trackers build and run:
each shrink rule on a config made for it, then the types they made run, passing on a fault-free sim."""

from __future__ import annotations

import pytest

from op_db.records import Status, WorkItem

NEWLY_RUNNING = [
    "efficientloftr",  # stage widths ending at hidden_size, a rotary part sized by the width
    "seggpt",  # prompt and input images stacked into the config's image size
    "pi0",  # a policy's state, noise and timestep, camera images with their mask
    "sam3_tracker_video",  # its forward runs under torch.inference_mode, which the native sim serves
]


def run(ctx, subject):
    from conformance.models import runner

    return runner.run_item(WorkItem("model", subject, "forward", "float32", "eager"), ctx)


def test_stage_widths_that_end_at_the_width_scale_with_it():
    from conformance.models.shrink_joins import follow_widths

    values = {"hidden_size": 256, "out_features": [64, 64, 128, 256], "stage_num_blocks": [1, 2, 4, 14]}
    out = {"hidden_size": 32}
    follow_widths(values, out, {})
    assert out["out_features"] == [8, 8, 16, 32]
    assert "stage_num_blocks" not in out  # not widths by name


def test_a_rotary_part_wider_than_a_head_keeps_its_ratio_to_the_heads():
    from conformance.models.shrink_joins import wide_rotary_follows_heads

    rope = {"rope_theta": 10000.0, "partial_rotary_factor": 4.0}
    fixes = wide_rotary_follows_heads({"num_attention_heads": 8, "rope_parameters": rope}, {"num_attention_heads": 4})
    assert fixes["rope_parameters"]["partial_rotary_factor"] == 2.0
    partial = {"num_attention_heads": 8, "rope_parameters": {"partial_rotary_factor": 0.5}}
    assert wide_rotary_follows_heads(partial, {"num_attention_heads": 4}) == {}


def test_neck_feature_sizes_follow_the_patch_grid():
    from conformance.models.shrink_joins import feature_sizes_follow_image_size

    # SAM 3: 1008 px in 14 px patches is a 72-patch side; 32 px in 8 px patches a 4-patch side
    values = {"backbone_feature_sizes": [[288, 288], [144, 144], [72, 72]]}
    fixes = feature_sizes_follow_image_size(values, {"backbone_config": {"image_size": 32, "patch_size": 8}},
                                            {"backbone_config": {"image_size": 1008, "patch_size": 14}})
    assert fixes == {"backbone_feature_sizes": [[16, 16], [8, 8], [4, 4]]}


def test_each_run_gets_a_fresh_tracker_session():
    from conformance.models import zoo
    from conformance.models.inputs import cast_inputs, make_inputs

    model = zoo.build_model(zoo.pairs()["sam3_tracker_video"])
    inputs = make_inputs("base", model.config, 0, model=model)
    first, second = cast_inputs(inputs, "cpu"), cast_inputs(inputs, "cpu")
    assert first["inference_session"] is not second["inference_session"]
    assert model(**first).pred_masks.equal(model(**second).pred_masks)


@pytest.mark.parametrize("subject", NEWLY_RUNNING)
def test_newly_running_types_pass_on_a_fault_free_sim(models_ctx, subject):
    result = run(models_ctx, subject)
    assert result.status is Status.PASS, result.message
