"""Zoo input rules driven by what a forward documents, and shrink rules for sizes a default
config leaves to the checkpoint."""

from __future__ import annotations

import pytest


class _Config:
    state_dim = 11
    hidden_size = 32
    num_codebooks = 4
    sub_configs: dict = {}


class _Model:
    config = _Config()

    def forward(self, states, timesteps=None, attention_mask=None, query_embeds=None, input_ids=None):
        """
        states (`torch.FloatTensor` of shape `(batch_size, episode_length, state_dim)`):
            The states.
        timesteps (`torch.LongTensor` of shape `(batch_size, episode_length)`):
            The steps.
        attention_mask (`torch.Tensor` of shape `(batch_size, sequence_length)`):
            Valid positions.
        input_ids (`torch.LongTensor` of shape `(batch_size * num_codebooks, sequence_length)`):
            One row per codebook.
        """


def test_documented_shapes_are_sized_from_the_config():
    import torch

    from conformance.models.documented import BATCH, SEQ_LEN, documented_input, documented_tensors

    found = documented_tensors(_Model.forward, frozenset({"states", "query_embeds"}))
    states = documented_input(found["states"], _Config(), 0)
    assert states.shape == (BATCH, SEQ_LEN, 11) and states.dtype == torch.float32
    steps = documented_input(found["timesteps"], _Config(), 0)
    assert steps.dtype == torch.long and not steps.any()  # the first step: always in range
    mask = documented_input(found["attention_mask"], _Config(), 0)
    assert mask.dtype == torch.long and mask.all()
    # undocumented but required, and named as embeddings: a sequence of hidden states
    assert documented_input(found["query_embeds"], _Config(), 0).shape == (BATCH, SEQ_LEN, 32)


def test_an_undocumented_optional_argument_gets_nothing():
    from conformance.models.documented import documented_tensors

    assert "query_embeds" not in documented_tensors(_Model.forward)


def test_token_rows_stack_per_codebook_where_documented():
    from conformance.models.documented import stacked_rows

    assert stacked_rows(_Model(), "input_ids") == 4
    assert stacked_rows(_Model(), "states") == 1
    assert stacked_rows(None, "input_ids") == 1


@pytest.mark.parametrize("model_type", ["time_series_transformer", "informer", "autoformer"])
def test_a_forecast_horizon_left_to_the_checkpoint_gets_a_tiny_one(model_type):
    from conformance.models import zoo

    config = zoo.build_config(zoo.pairs()[model_type])
    assert config.prediction_length == 4 and config.context_length == 4


def test_a_composite_config_gives_a_head_built_from_its_part_that_part():
    from conformance.models import zoo

    model = zoo.build_model(zoo.pairs()["musicgen"])
    assert type(model.config).__name__ == "MusicgenDecoderConfig"
