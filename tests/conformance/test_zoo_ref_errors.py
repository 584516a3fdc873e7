"""REF_ERRORs that were the harness's fault: labels the loss head cannot read, a cast no user
makes, and failures whose message did not say whose fault they were."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")


class _CodebookLM(torch.nn.Module):
    """A MusicGen-like head: logits (batch * codebooks, sequence, vocab), labels (batch, sequence,
    codebooks), and a loss only for that layout."""

    codebooks, vocab = 4, 16

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(self.vocab, 8)
        self.heads = torch.nn.Linear(8, self.vocab * self.codebooks)

    def forward(self, input_ids, attention_mask=None, labels=None, use_cache=None):
        rows, length = input_ids.shape
        batch = rows // self.codebooks
        hidden = self.embed(input_ids).view(batch, self.codebooks, length, 8).mean(1)
        logits = self.heads(hidden).view(batch, length, self.codebooks, self.vocab).permute(0, 2, 1, 3)
        loss = None
        if labels is not None:
            if labels.shape != (batch, length, self.codebooks):
                raise ValueError(f"Expected input batch_size ({batch * length}) to match target batch_size")
            loss = torch.nn.functional.cross_entropy(logits.permute(0, 2, 1, 3).reshape(-1, self.vocab),
                                                     labels.reshape(-1))
        return types.SimpleNamespace(logits=logits.reshape(-1, length, self.vocab), loss=loss)


class _PredictsItsInput(torch.nn.Module):
    """An audio-language model listed as seq2seq: it ignores decoder ids and predicts its input."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(16, 16)

    def forward(self, input_ids, decoder_input_ids=None, labels=None):
        logits = self.embed(input_ids)
        loss = None
        if labels is not None:
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
        return types.SimpleNamespace(logits=logits, loss=loss)


def test_labels_take_the_layout_the_loss_head_reads():
    from conformance.models.labels import fit_labels
    from conformance.models.tokens import BATCH

    model = _CodebookLM()
    ids = torch.randint(0, 16, (BATCH * 4, 8))
    fitted = fit_labels(model, {"input_ids": ids}, ids.clone(), seed=0)
    assert fitted["labels"].shape == (BATCH, 8, 4)  # the sequence second: labels[:, t] is token t
    assert model(**fitted).loss is not None


def test_labels_follow_the_sequence_the_model_predicts():
    from conformance.models.labels import fit_labels

    ids, decoder = torch.randint(0, 16, (2, 8)), torch.randint(0, 16, (2, 6))
    fitted = fit_labels(_PredictsItsInput(), {"input_ids": ids, "decoder_input_ids": decoder}, decoder.clone(), seed=0)
    assert torch.equal(fitted["labels"], ids)  # the token input itself, not random tokens


def test_labels_the_head_accepts_first_time_are_kept_and_refused_ones_left_to_fail():
    from conformance.models.labels import fit_labels

    ids = torch.randint(0, 16, (2, 8))
    conventional = ids.clone()
    assert fit_labels(_PredictsItsInput(), {"input_ids": ids}, conventional, seed=0)["labels"] is conventional

    class Refuses(_PredictsItsInput):
        def forward(self, input_ids, labels=None):
            if labels is not None:
                raise ValueError("no layout fits")
            return super().forward(input_ids)

    assert fit_labels(Refuses(), {"input_ids": ids}, conventional, seed=0)["labels"] is conventional


def _fp32_router_model():
    """A tiny Transformers model whose router computes in float32 and says so, like Inkling 2."""
    from transformers import PretrainedConfig, PreTrainedModel

    class RouterModel(PreTrainedModel):
        config_class = PretrainedConfig
        _keep_in_fp32_modules_strict = ["router.weight"]
        _keep_in_fp32_modules = ["norm"]

        def __init__(self, config):
            super().__init__(config)
            self.proj = torch.nn.Linear(4, 4)
            self.router = torch.nn.Linear(4, 2, bias=False)
            self.norm = torch.nn.LayerNorm(4)
            self.post_init()

        def forward(self, x):
            return self.router(self.proj(x).float())

    return RouterModel(PretrainedConfig())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_model_is_cast_the_way_from_pretrained_casts_it(dtype):
    from conformance.models.dtype_plan import cast_model

    dtype = getattr(torch, dtype)
    with pytest.raises(RuntimeError, match="dtype"):  # the cast no user makes
        _fp32_router_model().to(dtype)(torch.ones(2, 4, dtype=dtype))
    model = cast_model(_fp32_router_model(), "cpu", dtype)
    assert model.router.weight.dtype == torch.float32 and model.proj.weight.dtype == dtype
    # the non-strict list is kept in float32 only in float16, as Transformers does
    assert model.norm.weight.dtype == (torch.float32 if dtype == torch.float16 else dtype)
    assert model(torch.ones(2, 4, dtype=dtype)).dtype == torch.float32
    assert cast_model(_fp32_router_model(), "cpu", torch.float64).router.weight.dtype == torch.float64


def _fails():
    raise RuntimeError("this run fails too")


def test_a_dtype_failure_of_the_model_says_so_when_its_float32_run_passes():
    from conformance.models.ref_failure import explain

    error = "RuntimeError: expected m1 and m2 to have the same dtype, but got: float != c10::BFloat16"
    message = explain(error, torch.bfloat16, lambda: None, _fails)
    assert "hard-codes float32" in message and "bfloat16" in message and message.endswith(error)
    assert explain(error, torch.bfloat16, _fails, _fails) == f"CPU reference failed: {error}"
    assert explain(error, torch.float32, lambda: None, _fails) == f"CPU reference failed: {error}"
    fft = "RuntimeError: Unsupported dtype BFloat16"
    assert "no bfloat16 kernel on the CPU" in explain(fft, torch.bfloat16, lambda: None, _fails)
    other = "ValueError: All samples in the batch must have at least one question token."
    assert explain(other, torch.bfloat16, lambda: None, _fails) == f"CPU reference failed: {other}"


def test_a_model_that_runs_one_sample_but_not_two_is_called_a_batching_bug():
    from conformance.models.ref_failure import explain, first_sample
    from conformance.models.tokens import BATCH

    error = "RuntimeError: shape '[2, 1, 7, 32]' is invalid for input of size 224"
    message = explain(error, torch.float32, _fails, lambda: None)
    assert f"fails on the CPU for a batch of {BATCH} but runs one sample" in message and message.endswith(error)
    cut = first_sample({"pixel_values": torch.ones(BATCH, 3), "grid": torch.ones(5, 3), "frame_idx": 0})
    assert cut["pixel_values"].shape == (1, 3) and cut["grid"].shape == (5, 3) and cut["frame_idx"] == 0


def test_a_backward_that_needs_training_mode_says_the_suite_runs_eval_mode():
    from conformance.models.ref_failure import explain

    error = ("AssertionError: If you want to train `ReformerModel` and its variations, make sure to use "
             "`model.train()` to put the model into training mode.")
    message = explain(error, torch.float32, _fails, _fails)
    assert "only in training mode" in message and "eval mode" in message and message.endswith(error)


def test_a_forward_with_nothing_to_differentiate_is_not_a_reference_failure():
    from conformance.models.passes import NothingToDifferentiate, surrogate_loss

    with pytest.raises(NothingToDifferentiate, match="nothing to differentiate"):
        surrogate_loss({"audio_codes": torch.ones(2, 3, dtype=torch.long), "under_inference_mode": torch.ones(2)})
    assert surrogate_loss({"x": torch.ones(2, requires_grad=True)}).requires_grad


def test_a_question_token_is_put_in_every_row_where_the_config_names_one():
    from conformance.models.inputs import _with_question_tokens

    ids = torch.zeros(2, 8, dtype=torch.long)
    marked = _with_question_tokens(types.SimpleNamespace(question_token_id=7), {"input_ids": ids})["input_ids"]
    assert ((marked == 7).sum(dim=1) == 1).all() and not ids.any()
    assert _with_question_tokens(types.SimpleNamespace(), {"input_ids": ids})["input_ids"] is ids


def test_layout_boxes_follow_the_token_ids():
    from conformance.models.modalities import layout_boxes

    boxes = layout_boxes((2, 10), seed=0)
    assert boxes.shape == (2, 10, 4) and (boxes[..., :2] <= boxes[..., 2:]).all() and boxes.max() < 1000


def test_a_generate_only_model_names_its_parts():
    from conformance.models.documented import GenerateOnly, MissingInputBuilder, generate_only

    class Part(torch.nn.Module):
        config = object()

        def forward(self, x):
            return x

    class Pipeline(torch.nn.Module):  # no forward: nn.Module's _forward_unimplemented
        def __init__(self):
            super().__init__()
            self.semantic, self.scale = Part(), torch.nn.Identity()

    reason = generate_only(Pipeline())
    assert isinstance(reason, GenerateOnly) and isinstance(reason, MissingInputBuilder)
    assert "Pipeline has no forward of its own (generate only)" in str(reason)
    assert str(reason).endswith("its parts with a forward: semantic (Part)")


def test_a_class_the_auto_mapping_names_but_transformers_lacks_is_not_a_model_failure():
    from conformance.models.zoo import ZooEntry, class_exists, missing_class_reason

    entry = ZooEntry("ghost", "base", "GhostModelThatDoesNotExist", "PretrainedConfig")
    assert not class_exists(entry)
    assert "defines no such class" in missing_class_reason(entry)
    assert class_exists(ZooEntry("bert", "base", "BertModel", "BertConfig"))


class _DocumentLM(_PredictsItsInput):
    """A document model (UDOP-like): every token has a layout box, which it cannot do without."""

    def forward(self, input_ids, attention_mask=None, bbox=None, labels=None):
        if bbox is None or bbox.shape[:2] != input_ids.shape:
            raise TypeError("'NoneType' object is not subscriptable")
        return super().forward(input_ids, labels=labels)


def test_a_document_model_gets_a_layout_box_per_token():
    from transformers import PretrainedConfig

    from conformance.models.inputs import make_inputs

    model = _DocumentLM()
    model.config = PretrainedConfig(vocab_size=16)
    inputs = make_inputs("causal-lm", model.config, 0, labels=True, model=model)
    assert inputs["bbox"].shape == (*inputs["input_ids"].shape, 4)
    assert model(**inputs).loss is not None


def test_a_forward_counting_images_per_sample_says_the_suite_has_no_rule_for_it():
    from conformance.models.documented import MissingInputBuilder
    from conformance.models.inputs import image_inputs

    class TargetGrids(torch.nn.Module):
        def forward(self, input_ids, pixel_values=None, image_grid_thw=None, images_per_sample=None):
            return input_ids

    with pytest.raises(MissingInputBuilder, match="a gap of this suite, not of the model"):
        image_inputs(TargetGrids(), types.SimpleNamespace(), 0)
