"""Inputs that only a class's pipeline makes: the `Context` each per-class input rule is given
(`rules_transformers.py`, `rules_video.py`, `rules_codecs.py`; `inputs.py` looks them up).

Some forwards take a structure only their pipeline knows how to make: index tensors, rotary
positions computed outside the model, an audio stream beside the video, the shapes of packed
images. For those classes an entry builds the inputs the pipeline would hand the model, from the
tiny model's config and `Geometry`. Inputs an entry does not name are made by the general rules of
`rules.py`; an entry's value `SKIPPED` leaves an optional input to its default.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from conformance.models.diffusers.geometry import Geometry
from conformance.models.diffusers.rules import _generator, _name_seed, _randn


@dataclasses.dataclass(frozen=True)
class Context:
    model: Any
    config: dict[str, Any]
    g: Geometry
    seed: int
    params: dict[str, Any]  # the forward's parameters

    def randn(self, name: str, *shape: int):
        return _randn(tuple(shape), _name_seed(self.seed, name))

    def randint(self, name: str, high: int, *shape: int):
        import torch

        return torch.randint(0, high, tuple(shape), generator=_generator(_name_seed(self.seed, name)))


def text_states(c: Context, name: str, batch: int | None = None, width: int | None = None, length: int | None = None):
    """Text-encoder states at the geometry's batch, text length and width unless given."""
    g = c.g
    return c.randn(name, batch or g.batch, length or g.text_length, width or g.text_width or 32)
