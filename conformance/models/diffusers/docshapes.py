"""Input shapes read off a forward's docstring.

Diffusers documents many forwards' tensors as ``name (`torch.Tensor` of shape `(batch_size,
embedding_dim)`)``. Each dimension is an expression of names and integers; a name is read, in
order, as the batch, a config key of the model (so `embedding_dim` is the tiny model's own
width), a product of config keys (`num_condition_layers * condition_hidden_dim`), or a length.
Every length of one forward takes the same value (a text/encoder length its own), so two inputs
that share a `length` agree. A dimension no rule resolves (a checkpoint's literal width such as
768) drops that parameter's docstring option, and the other rules decide.
"""

from __future__ import annotations

import math
import re
from typing import Any

SHAPE = re.compile(r"^\s*(\w+) \(`?[^\n]*?of shape `?\(([^)]*)\)", re.M)
BATCH_NAMES = frozenset({"batch", "batch_size", "n", "b", "bs"})
TEXT_LENGTH_NAMES = re.compile(r"^(encoder|text|prompt|context|cond)\w*(len|length|tokens)$")
LENGTH_NAMES = re.compile(r"^(\w+_)?(len|length|seq_len|seq_length|sequence_length|frames|num_frames|"
                          r"num_mel_frames|tokens|num_tokens|time|t)$")
SEQUENCE = 16  # every plain length of one forward: even, so 1-D patching by 2 or 4 divides it


def docstring_shapes(fn: Any) -> dict[str, str]:
    """Parameter name -> the shape text its docstring gives ("batch_size, embedding_dim")."""
    doc = getattr(fn, "__doc__", None) or ""
    return {name: shape for name, shape in SHAPE.findall(doc)}


def _literal(value: int, config: dict[str, Any], defaults: dict[str, Any]) -> int | None:
    """The tiny value of the one width the literal is the default of (None when none or several)."""
    tiny = {config[k] for k, v in defaults.items() if v == value and isinstance(config.get(k), int)}
    return tiny.pop() if len(tiny) == 1 else None


def _dimension(term: str, config: dict[str, Any], sizes: tuple[int, int, int], defaults: dict[str, Any]) -> int | None:
    term = term.strip()
    batch, text_length, audio_length = sizes
    if not term:
        return None
    if "+" in term or "*" in term:
        sign = "+" if "+" in term else "*"
        parts = [_dimension(t, config, sizes, defaults) for t in term.split(sign)]
        if None in parts:
            return None
        return sum(parts) if sign == "+" else math.prod(parts)
    if term.isdigit():
        return _literal(int(term), config, defaults)
    key = term.lower()
    if key in BATCH_NAMES:
        return batch
    value = config.get(term)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if key == "num_samples":  # a waveform's samples
        return audio_length
    if TEXT_LENGTH_NAMES.match(key):
        return text_length
    if LENGTH_NAMES.match(key):
        return SEQUENCE
    return None


def shape_of(text: str, config: dict[str, Any], sizes: tuple[int, int, int],
             defaults: dict[str, Any]) -> tuple[int, ...] | None:
    """The shape a docstring's text names (sizes: batch, text length, waveform length), or None
    where a dimension cannot be resolved."""
    terms = [t for t in text.split(",") if t.strip()]
    dims = [_dimension(t, config, sizes, defaults) for t in terms]
    return None if not dims or None in dims else tuple(dims)


def docstring_option(name: str, fn: Any, model: Any, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """The tensor the docstring describes for `name`: ones for a mask, token ids for ids, a
    standard normal otherwise; None where the docstring says nothing usable."""
    import torch

    from conformance.models.diffusers.rules import MASK, _generator, _name_seed
    from conformance.models.diffusers.rules_codecs import waveform_length
    from conformance.models.diffusers.shrink import default_config

    text = docstring_shapes(fn).get(name)
    if text is None:
        return None
    sizes = (g.batch, g.text_length, waveform_length(config, g.side))
    shape = shape_of(text, config, sizes, default_config(type(model)))
    if shape is None:
        return None
    generator = _generator(_name_seed(seed, name))
    if MASK.search(name):
        return [torch.ones(shape, dtype=torch.long), torch.ones(shape, dtype=torch.bool)]
    if name.endswith("_ids"):
        vocab = config.get("vocab_size") if isinstance(config.get("vocab_size"), int) else 16
        return [torch.randint(0, vocab, shape, generator=generator)]
    return [torch.randn(shape, generator=generator)]
