"""The Diffusers zoo's input mechanisms for codecs, audio models and conditioning encoders:
shapes read off forward docstrings, compression ratios read off the built model, single-frame
samples for image codecs built on video ones, per-class rules and config joins. Each test builds
one class tiny and runs its real forward (an autoencoder's encode and decode) on the CPU."""

from __future__ import annotations

import pytest

pytest.importorskip("diffusers")


def check(class_name: str):
    from conformance.models.diffusers import zoo
    from conformance.models.diffusers.census import check_class

    return check_class(zoo.catalogue()[f"diffusers:{class_name}"])


def inputs_of(class_name: str):
    from conformance.models.diffusers import zoo
    from conformance.models.diffusers.item import make_inputs

    entry = zoo.catalogue()[f"diffusers:{class_name}"]
    model = zoo.build_model(entry)
    return model, make_inputs(model, entry, 0)


@pytest.mark.parametrize("text, shape", [
    ("batch_size, embedding_dim", (2, 48)),
    ("batch, frames, num_condition_layers * condition_hidden_dim", (2, 16, 6 * 8)),
    ("N, prefix_length + max_seq_len", (2, 4 + 16)),
    ("batch_size, encoder_seq_len, 768", (2, 8, 32)),
])
def test_docstring_dimensions_resolve_against_the_tiny_config(text, shape):
    from conformance.models.diffusers.docshapes import shape_of

    config = {"embedding_dim": 48, "num_condition_layers": 6, "condition_hidden_dim": 8, "prefix_length": 4,
              "n_embd": 32}
    defaults = {"n_embd": 768, "embedding_dim": 768 * 2}
    assert shape_of(text, config, (2, 8, 64), defaults) == shape


@pytest.mark.parametrize("text", ["batch_size, hidden_dim", "batch, 1024", ""])
def test_docstring_dimensions_nothing_resolves_give_no_shape(text):
    from conformance.models.diffusers.docshapes import shape_of

    assert shape_of(text, {"n_embd": 32}, (2, 8, 64), {"n_embd": 768}) is None


def test_prior_transformer_takes_the_shapes_its_docstring_gives():
    model, inputs = inputs_of("PriorTransformer")
    width = model.config.embedding_dim
    assert inputs["hidden_states"].shape == (2, width) and inputs["proj_embedding"].shape == (2, width)


@pytest.mark.parametrize("class_name", [
    "UniDiffuserTextDecoder",  # a docstring's literal 768 read as the tiny n_embd
    "T5FilmDecoder",  # per-class rule: the (encoding, mask) pairs of the spectrogram pipeline
    "AutoencoderKLMagvit",  # frames and side from the compression ratios the model computes
    "AutoencoderKLQwenImage21",  # an image codec on a causal video one: one frame, 5-D
    "AutoencoderOobleck",  # override: the decoder's input is half the encoder's output
    "MultiAdapter",  # one control image per wrapped adapter
])
def test_codec_class_builds_and_runs_a_forward(class_name):
    status = check(class_name)
    assert status.ok, f"{class_name}: {status.cause}: {status.detail}"
    assert status.ops  # the forward dispatched aten ops


def test_video_codec_sample_covers_its_temporal_compression():
    from conformance.models.diffusers.forward import DECODE, ENCODE

    model, inputs = inputs_of("AutoencoderKLMagvit")
    frames = inputs[ENCODE]["x"].shape[2]
    assert (frames - 1) % model.temporal_compression_ratio == 0 and frames > 1
    assert inputs[DECODE]["z"].shape[2] == 1 + (frames - 1) // model.temporal_compression_ratio
