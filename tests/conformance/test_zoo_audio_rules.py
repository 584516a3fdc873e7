"""Zoo rules for audio, speech, text-to-waveform and time-series models: series layouts, audio
with text, extractor companions, codebook token layouts, pass-through audio encoders, and the
stem width of stage-doubling towers. Pure config/input level: no model is built."""

from __future__ import annotations

import collections.abc
import types

import pytest


class _Forecaster:
    """A forward that documents a univariate series and a padding over the same steps."""

    config = types.SimpleNamespace(context_length=16, patch_length=4)

    def forward(self, past_values, past_values_padding=None, freq=None):
        """
        past_values (`torch.Tensor` of shape `(batch_size, sequence_length)`):
            The series.
        """


class _SequenceForecaster:
    config = types.SimpleNamespace(context_length=16)

    def forward(self, past_values: collections.abc.Sequence[int], window_size=None):  # a sequence of 1-D series
        """No shapes documented."""


class _Multivariate:
    config = types.SimpleNamespace(context_length=16, num_input_channels=3)

    def forward(self, past_values, past_observed_mask=None):
        """
        past_values (`torch.FloatTensor` of shape `(bs, sequence_length, num_input_channels)`):
            The series.
        """


@pytest.mark.parametrize("model, shape", [(_Forecaster(), (2, 16)), (_SequenceForecaster(), (2, 16)),
                                          (_Multivariate(), (2, 16, 3))])
def test_a_series_is_univariate_where_documented_or_taken_as_a_sequence(model, shape):
    from conformance.models.time_series import series_builder

    assert tuple(series_builder("past_values")(model.config, model, 0, "base").shape) == shape


def test_a_series_padding_spans_the_series_and_marks_every_step_real():
    import torch

    from conformance.models.time_series import series_builder

    model = _Forecaster()
    padding = series_builder("past_values_padding")(model.config, model, 0, "base")
    assert padding.shape == (2, 16) and padding.dtype == torch.long and not padding.any()
    mask = series_builder("past_observed_mask")(_Multivariate.config, _Multivariate(), 0, "base")
    assert mask.shape == (2, 16, 3) and mask.all()


class _NeedsText:
    """Reads speech with text (CLVP): audio alone is rejected."""

    def forward(self, input_ids=None, input_features=None, attention_mask=None):
        if input_ids is None:
            raise ValueError("You have to specify either input_ids or inputs_embeds")

    __call__ = forward


class _SpeechOnly:
    def forward(self, input_ids=None, input_features=None, attention_mask=None):
        pass

    __call__ = forward


def test_audio_is_offered_alone_first_and_with_text_where_rejected():
    import torch

    from conformance.models.speech_text import with_text_if_needed

    audio = {"input_features": torch.zeros(2, 4, 8)}
    text = lambda: torch.ones(2, 8, dtype=torch.long)  # noqa: E731
    assert with_text_if_needed(_SpeechOnly(), audio, text) == audio
    both = with_text_if_needed(_NeedsText(), audio, text)
    assert set(both) == {"input_features", "input_ids", "attention_mask"}
    assert both["attention_mask"].shape == (2, 8)


def test_extractor_companions_are_the_outputs_the_forward_takes_beside_the_features():
    from conformance.models.speech_text import extractor_companions

    features = {"input_features": 1, "is_longer": 2, "attention_mask": 3, "padding_mask": 4, "other": 5}
    params = {"input_features", "is_longer", "attention_mask", "padding_mask"}
    assert extractor_companions(features, params, {"input_features": 1, "padding_mask": 0}) == {"is_longer": 2}
    assert extractor_companions(None, params, {}) == {}


class _Inner:
    def get_audio_features(self, input_values, padding_mask=None):
        pass


class _PassThroughHead:
    model = _Inner()

    def get_audio_features(self, *args, **kwargs):
        return self.model.get_audio_features(*args, **kwargs)


class _HeadWithout:
    model = _Inner()


def test_audio_features_are_found_through_a_pass_through_or_on_the_wrapped_model():
    from conformance.models.speech_text import audio_encoder, audio_feature_params

    assert audio_feature_params(_PassThroughHead()) == {"input_values", "padding_mask"}
    head = _HeadWithout()
    assert audio_encoder(head) is head.model
    assert audio_encoder(types.SimpleNamespace()) is None


def test_codebooks_are_counted_by_name_and_channels_only_in_a_token_config():
    from conformance.models.codebook_tokens import codebook_count

    assert codebook_count(types.SimpleNamespace(num_codebooks=32)) == 32
    decoder = types.SimpleNamespace(num_channels=9, vocab_size=1028)
    assert codebook_count(types.SimpleNamespace(sub_configs={"decoder_config": None}, decoder_config=decoder)) == 9
    assert codebook_count(types.SimpleNamespace(num_channels=3)) is None  # an image's channels


def test_codebook_layouts_give_each_token_input_a_codebook_axis_in_turn():
    import torch

    from conformance.models.codebook_tokens import codebook_layouts

    inputs = {"input_ids": torch.ones(2, 8, dtype=torch.long), "decoder_input_ids": torch.ones(2, 6, dtype=torch.long)}
    shapes = [(tuple(c["input_ids"].shape), tuple(c["decoder_input_ids"].shape)) for c in codebook_layouts(inputs, 3)]
    assert shapes == [((2, 8, 3), (2, 6)), ((2, 8, 4), (2, 6)), ((2, 8), (2, 6, 3)), ((2, 8), (2, 6, 4))]


def test_a_stage_doubling_towers_stem_width_follows_its_tiny_hidden_size():
    from conformance.models.shrink_joins import stem_width_follows_stages

    values = {"hidden_size": 768, "patch_embeds_hidden_size": 96, "depths": [2, 2, 6, 2], "projection_dim": 512}
    out = {"hidden_size": 32, "depths": [2, 2]}
    assert stem_width_follows_stages(values, out) == {"patch_embeds_hidden_size": 16}
    # a width that is not the stem (768 / 8 != 512) and a tower without stages are left alone
    assert stem_width_follows_stages({"hidden_size": 768, "projection_dim": 512}, {"hidden_size": 32}) == {}
