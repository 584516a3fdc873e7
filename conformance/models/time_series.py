"""Time-series inputs: the past values a forecaster reads and the masks, paddings and time
features that go beside them, all over one span of time steps (the config's context plus its
largest lag).

A series is univariate, (batch, time), where the config says so (`input_size` 1), where the
forward documents `past_values` with two dimensions, or where it takes them as a sequence of
tensors (one 1-D series per sample: TimesFM's forecasters); otherwise it is (batch, time,
channels). Paddings mark every step real (zeros), observed masks every value observed (ones).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from conformance.models.tokens import BATCH, _generator
from conformance.models.tokens import config_value as _get

# The series inputs this module builds, by forward parameter name.
SERIES_INPUTS = ("past_values", "past_time_features", "past_observed_mask", "past_values_padding")


def series_length(config: Any) -> int:
    context = int(_get(config, "context_length", default=32))
    lags = _get(config, "lags_sequence", default=[0]) or [0]
    return context + int(max(lags))


def takes_univariate(config: Any, model: Any) -> bool:
    """Whether `past_values` is (batch, time): said by the config, the docstring or the annotation."""
    from conformance.models.documented import documented_tensors

    if getattr(config, "input_size", None) == 1:
        return True
    if model is None:
        return False
    documented = documented_tensors(model.forward).get("past_values")
    if documented is not None and len(documented.dims) == 2:
        return True
    param = inspect.signature(model.forward).parameters.get("past_values")
    return param is not None and "Sequence[" in str(param.annotation)


def series_shape(key: str, config: Any, model: Any) -> tuple[int, ...]:
    length = series_length(config)
    if key == "past_time_features":
        return BATCH, length, int(_get(config, "num_time_features", default=1))
    if key == "past_values_padding":
        return BATCH, length
    if takes_univariate(config, model):
        return BATCH, length
    return BATCH, length, int(_get(config, "num_input_channels", "input_size", default=1))


def series_builder(key: str) -> Callable[..., Any]:
    """builder(config, model, seed, task) of the series input `key`."""
    def build(config, model, seed, task):
        import torch

        shape = series_shape(key, config, model)
        if key == "past_values_padding":
            return torch.zeros(shape, dtype=torch.long)
        tensor = torch.randn(shape, generator=_generator(seed + 5))
        return torch.ones_like(tensor) if key == "past_observed_mask" else tensor
    return build
