"""The derived zoo: task tables from Transformers' mappings, one representative of each new
task table passing on a fault-free sim, and a fault in one caught."""

from __future__ import annotations

import re

import pytest

from op_db.records import Status, WorkItem

# One representative per task table the zoo gained from deriving its tasks.
REPRESENTATIVES = [
    "bert:token-classification", "bert:question-answering", "bert:multiple-choice", "bert:base",
    "whisper:speech-seq2seq", "wav2vec2:ctc", "wav2vec2:audio-classification", "detr:object-detection",
    "segformer:semantic-segmentation", "dpt:base", "clip:zero-shot-image-classification",
    "videomae:video-classification", "patchtsmixer:time-series-regression", "layoutlm:token-classification",
    "glpn:depth-estimation",
    # tables reached by the shrink rules for joined parts: backbone stages, queries, <eos> pooling
    "tipsv2_dpt:depth-estimation", "rf_detr:object-detection", "bart:sequence-classification",
    # inputs from the shapes a forward documents: a trajectory, stacked codebook rows
    "decision_transformer", "musicgen",
]


def run(models_ctx, subject):
    from conformance.models import runner

    return runner.run_item(WorkItem("model", subject, "forward", "float32", "eager"), models_ctx)


def test_derived_tasks_match_every_mapping_of_the_installed_transformers():
    from transformers.models.auto import configuration_auto, modeling_auto

    from conformance.models import tasks, zoo

    mappings = {name for name in dir(modeling_auto)
                if re.fullmatch(r"MODEL_(FOR_\w+_)?MAPPING_NAMES", name) and isinstance(getattr(modeling_auto, name), dict)}
    assert {t.mapping for t in tasks.task_tables()} == mappings
    assert len(mappings) > 40
    expected = set()
    for name in mappings:
        task = tasks.task_name(name)
        for model_type, class_name in getattr(modeling_auto, name).items():
            if model_type in configuration_auto.CONFIG_MAPPING_NAMES:
                head = class_name[0] if isinstance(class_name, (list, tuple)) else class_name
                expected.add((model_type, task, head))
    assert {(e.model_type, e.task, e.class_name) for e in zoo.pairs().values()} == expected
    assert len(zoo.catalogue()) == len({t for t, _, _ in expected})


def test_task_names_and_subjects():
    from conformance.models import tasks, zoo

    assert tasks.task_name("MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES") == "token-classification"
    assert tasks.task_name("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES") == "speech-seq2seq"
    assert tasks.task_name("MODEL_MAPPING_NAMES") == "base"
    assert tasks.tasks()[0] == "causal-lm" and tasks.tasks()[-1] == "base"
    bert = [e for e in zoo.pairs().values() if e.model_type == "bert"]
    assert [e.subject for e in bert if e.primary] == ["bert"]
    assert {"bert:token-classification", "bert:base"} <= {e.subject for e in bert}


def test_unknown_task_names_the_known_ones():
    from op_db.errors import InputError

    from conformance.models import zoo

    with pytest.raises(InputError, match="known tasks: causal-lm, .*token-classification.*, base"):
        zoo.select(tasks=["speech"])


@pytest.mark.parametrize("subject", REPRESENTATIVES)
def test_new_task_tables_pass_on_a_fault_free_sim(models_ctx, use_profile, subject):
    result = run(models_ctx, subject)
    assert result.status is Status.PASS, result.message
    from conformance.models import zoo

    assert result.aten_ops and result.extra["task"] == zoo.pairs()[subject].task


def test_a_fault_in_an_audio_model_is_caught(models_ctx, use_profile):
    use_profile({"name": "gelu-scale",
                 "faults": [{"op": "aten.gelu.default", "dtype": "float32", "kind": "scale", "value": 1.05}]})
    result = run(models_ctx, "wav2vec2:ctc")
    assert result.status is Status.MISMATCH
    assert result.divergence and "wav2vec2" in result.divergence


def test_a_fault_in_a_model_fed_documented_inputs_is_caught(models_ctx, use_profile):
    # musicgen's decoder takes a row per codebook (documented as batch_size * num_codebooks)
    use_profile({"name": "gelu-scale",
                 "faults": [{"op": "aten.gelu.default", "dtype": "float32", "kind": "scale", "value": 1.05}]})
    result = run(models_ctx, "musicgen")
    assert result.status is Status.MISMATCH
    assert result.divergence == "model.decoder.layers.0.activation_fn (GELUActivation)"


def test_a_generate_only_model_is_skipped_naming_its_parts(models_ctx):
    result = run(models_ctx, "bark")  # a pipeline of models: nothing to run forward, on any device
    assert result.status is Status.SKIP
    assert "BarkModel has no forward of its own (generate only)" in result.message
    assert "semantic (BarkSemanticModel)" in result.message


def test_joined_parts_follow_their_shrunk_sizes():
    from conformance.models import zoo

    depth = zoo.build_config(zoo.pairs()["depth_anything"])
    backbone = depth.backbone_config
    assert backbone.out_indices == [1, 2, 3, 4] == list(range(1, backbone.num_hidden_layers + 1))
    assert depth.reassemble_hidden_size == backbone.hidden_size == 32  # the neck reads the backbone's width
    swin = zoo.build_config(zoo.pairs()["grounding-dino"]).backbone_config
    assert len(swin.depths) == len(swin.out_indices) == 3 and swin.window_size == 4
    assert swin.embed_dim % max(swin.num_heads) == 0
