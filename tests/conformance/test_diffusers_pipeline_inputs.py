"""Diffusers classes whose forward takes what only their pipeline makes: one class per mechanism
builds tiny and runs its real forward on the CPU, with inputs of the shapes its pipeline gives it."""

from __future__ import annotations

import pytest

pytest.importorskip("diffusers")


def build(class_name):
    from conformance.models.diffusers import zoo

    entry = zoo.catalogue()[f"diffusers:{class_name}"]
    return entry, zoo.build_model(entry)


def inputs_of(class_name):
    from conformance.models.diffusers.item import make_inputs

    entry, model = build(class_name)
    return model, make_inputs(model, entry, 0)


@pytest.mark.parametrize("class_name", [
    "GlmImageTransformer2DModel",  # a per-class rule: prior VQ tokens per latent patch
    "LTX2VideoTransformer3DModel",  # a video rule: an audio stream beside the video; audio widths shrunk apart
    "ZImageControlNetModel",  # a companion: modules shared with a tiny Z-Image transformer
    "QwenImageMultiControlNetModel",  # a wrapper of one Union net over several conditions
    "OmniGenTransformer2DModel",  # a padding token id kept inside the shrunk vocabulary
    "EasyAnimateTransformer3DModel",  # no T5 states where the config has no T5 projection
])
def test_class_builds_tiny_and_runs_its_forward(class_name):
    from conformance.models.diffusers.census import check_class
    from conformance.models.diffusers.zoo import catalogue

    status = check_class(catalogue()[f"diffusers:{class_name}"])
    assert status.ok, f"{class_name}: {status.cause}: {status.detail}"
    assert status.ops, "the forward dispatched no aten op"


def test_animatediff_unet_gets_prompt_states_per_frame():
    model, inputs = inputs_of("UNetMotionModel")
    batch, _, frames = inputs["sample"].shape[:3]
    assert inputs["encoder_hidden_states"].shape[0] == batch * frames


def test_text_masks_are_masks_not_text_states():
    _, inputs = inputs_of("QwenImageTransformer2DModel")
    mask, states = inputs["encoder_hidden_states_mask"], inputs["encoder_hidden_states"]
    assert mask.shape == states.shape[:2] and not mask.is_floating_point()


def test_a_learned_frame_table_fixes_the_frame_count():
    model, inputs = inputs_of("LatteTransformer3DModel")
    assert inputs["hidden_states"].shape[2] == model.config.video_length


def test_qwen_image_multi_controlnet_holds_one_union_net():
    _, model = build("QwenImageMultiControlNetModel")
    assert len(model.nets) == 1


def test_z_image_controlnet_shares_its_companions_modules():
    _, model = build("ZImageControlNetModel")
    assert model.cap_embedder is not None and model.noise_refiner is not None
    names = {name for name, _ in model.named_parameters()}
    assert any(name.startswith("cap_embedder.") for name in names)  # registered, so .to(device) moves it


def test_a_second_streams_widths_follow_its_own_attention_width():
    from conformance.models.diffusers.shrink import shrink

    values = {"num_attention_heads": 32, "attention_head_dim": 128, "cross_attention_dim": 4096,
              "audio_num_attention_heads": 32, "audio_attention_head_dim": 64, "audio_cross_attention_dim": 2048}
    tiny = {**values, **shrink(values)}
    assert tiny["cross_attention_dim"] == tiny["num_attention_heads"] * tiny["attention_head_dim"]
    assert tiny["audio_cross_attention_dim"] == tiny["audio_num_attention_heads"] * tiny["audio_attention_head_dim"]


def test_special_token_ids_stay_inside_the_shrunk_vocabulary():
    from conformance.models.diffusers.shrink import shrink

    tiny = shrink({"vocab_size": 32064, "pad_token_id": 32000, "hidden_size": 3072})
    assert tiny["pad_token_id"] < tiny["vocab_size"]


def test_every_class_rule_names_an_exported_model_class():
    from conformance.models.diffusers.rules_transformers import CLASS_INPUTS
    from conformance.models.diffusers.rules_video import VIDEO_INPUTS
    from conformance.models.diffusers.zoo import model_classes

    classes = model_classes()
    for name in {**CLASS_INPUTS, **VIDEO_INPUTS}:
        assert name in classes, f"{name} is not a Diffusers model class: its rule would never apply"
