"""Inputs built from the shapes a forward documents, for forwards whose main input no rule in
`modalities.py` knows (trajectories, latents, query or noise embeddings, forecast paddings).

Transformers documents each forward argument as "name (`torch.Tensor` of shape `(batch_size,
hidden_size, frames)`)". Each dimension name becomes a size: `batch_size` the batch, a number
itself, a field of the model's config (or of one of its sub-configs) its value, any other name
(a length: `sequence_length`, `frames`, `episode_length`) the tiny sequence length.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
from typing import Any
from conformance.models.tokens import BATCH, SEQ_LEN, _generator

# "name (`torch.LongTensor` of shape `(batch_size, sequence_length)`" (or `[batch_size, ...]`)
DOCUMENTED_ARG = re.compile(r"^\s*(\w+) \(`([^`]*)` of shape `(?:\(([^)]*)\)|\[([^\]]*)\])`", re.M)
# A dimension sized by the length of a config list: `len(config.target_layer_ids)`.
LIST_LENGTH = re.compile(r"len\((?:config\.)?(\w+)\)")


@dataclasses.dataclass(frozen=True)
class DocumentedTensor:
    name: str
    type_name: str  # e.g. "torch.LongTensor"
    dims: tuple[str, ...]

    @property
    def integral(self) -> bool:
        return "Long" in self.type_name or "Int" in self.type_name or "Bool" in self.type_name


# Undocumented arguments whose names say they are a sequence of the model's hidden states.
HIDDEN_SUFFIXES = ("_embeds", "hidden_states")


def documented_tensors(forward: Any, required: frozenset[str] = frozenset()) -> dict[str, DocumentedTensor]:
    """The tensor arguments `forward`'s docstring gives a shape for, by name; a `required`
    argument it leaves undocumented that is named as embeddings or hidden states
    (Blip2QFormer's query_embeds) is a (batch, length, hidden_size) sequence."""
    found: dict[str, DocumentedTensor] = {}
    for name, type_name, parenthesized, bracketed in DOCUMENTED_ARG.findall(getattr(forward, "__doc__", None) or ""):
        dims = parenthesized or bracketed
        if "Tensor" in type_name:
            found.setdefault(name, DocumentedTensor(name, type_name, tuple(d.strip() for d in dims.split(",")
                                                                              if d.strip())))
    for name in sorted(required - set(found)):
        if name.endswith(HIDDEN_SUFFIXES):
            found[name] = DocumentedTensor(name, "torch.FloatTensor", ("batch_size", "sequence_length", "hidden_size"))
    return found


# Audio features span more frames than a text sequence: encoders subsample them by up to 8.
AUDIO_FRAMES = 64
# Generic dimension names and the config fields that size them, first found wins.
DIM_FIELDS: dict[str, tuple[str, ...]] = {
    "feature_dim": ("feature_projection_input_dim", "num_mel_bins", "input_feat_per_channel", "feature_size"),
    "dim": ("dim", "hidden_size"),
}


def _size(dim: str, config: Any, length: int) -> int:
    """A dimension's size; sums and products of sizes (`dim * len(config.target_layer_ids)`, a
    mask over `context + config.block_size` positions) are worked out."""
    dim = dim.strip().removeprefix("config.")
    if "+" in dim:
        return sum(_size(part, config, length) for part in dim.split("+"))
    if "*" in dim:
        return math.prod(_size(part, config, length) for part in dim.split("*"))
    counted = LIST_LENGTH.fullmatch(dim)
    if counted and isinstance(getattr(config, counted.group(1), None), (list, tuple)):
        return len(getattr(config, counted.group(1)))
    if dim == "batch_size":
        return BATCH
    if dim.isdigit():
        return int(dim)
    configs = (config, *(getattr(config, key, None) for key in getattr(config, "sub_configs", {}) or {}))
    for field in DIM_FIELDS.get(dim, (dim,)):
        for cfg in configs:
            value = getattr(cfg, field, None) if cfg is not None else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return length


def documented_input(tensor: DocumentedTensor, config: Any, seed: int):
    """A tensor of the documented shape: masks all ones (every position valid), paddings all
    zeros (none padded), other integer tensors zeros (the first step, frequency or class, always
    in range), float tensors standard normal from a private generator."""
    import torch

    length = AUDIO_FRAMES if tensor.name.startswith(("input_features", "feature_attention")) else SEQ_LEN
    shape = tuple(_size(dim, config, length) for dim in tensor.dims)
    if "mask" in tensor.name:
        return torch.ones(shape, dtype=torch.long)
    if tensor.integral or "padding" in tensor.name:
        return torch.zeros(shape, dtype=torch.long if tensor.integral else torch.float32)
    return torch.randn(shape, generator=_generator(seed + 9))


def stacked_rows(model: Any, name: str) -> int:
    """Rows per sample of the token tensor `name`: k where the forward documents its first
    dimension as `batch_size * k` (Musicgen decoders stack one row per codebook), else 1."""
    if model is None:
        return 1
    tensor = documented_tensors(model.forward).get(name)
    if tensor is None or not tensor.dims or "*" not in tensor.dims[0]:
        return 1
    rows = 1
    for factor in (f.strip() for f in tensor.dims[0].split("*")):
        if factor != "batch_size":
            rows *= _size(factor, model.config, 1)
    return rows


def required_params(params: dict[str, inspect.Parameter]) -> set[str]:
    return {name for name, p in params.items() if p.default is inspect.Parameter.empty
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and name != "self"}


def documented_inputs(model: Any, config: Any, names: set[str], seed: int) -> dict[str, Any]:
    """Tensors of the shapes the forward documents for `names` (those it documents)."""
    documented = documented_tensors(model.forward, frozenset(required_params(
        dict(inspect.signature(model.forward).parameters))))
    return {name: documented_input(documented[name], config, seed) for name in sorted(names) if name in documented}


# The inputs a rule in modalities.py builds; a forward taking none of them gets documented shapes.
MAIN_INPUTS = ("input_ids", "pixel_values", "input_values", "input_features", "past_values", "pixel_values_videos",
               "flattened_patches", "audio_mel")


class MissingInputBuilder(Exception):
    """No rule builds this forward's main input."""


class GenerateOnly(MissingInputBuilder):
    """The model has no forward at all, only `generate` (a pipeline of several models): a
    forward or backward item has nothing to run, on the CPU or the device."""


def generate_only(model: Any) -> GenerateOnly:
    """The reason, naming the parts that do have a forward (the zoo checks a part itself where
    Transformers lists it as a model type, e.g. the Qwen Omni thinkers)."""
    parts = [f"{name} ({type(child).__name__})" for name, child in model.named_children()
             if hasattr(child, "config") and getattr(child.forward, "__name__", "") != "_forward_unimplemented"]
    named = f"; its parts with a forward: {', '.join(parts)}" if parts else ""
    return GenerateOnly(f"{type(model).__name__} has no forward of its own (generate only): nothing to run "
                        f"forward or backward{named}")


# Documented arguments left to the model even where a forward has no other input: it derives them.
DERIVED = frozenset({"position_ids", "cache_position", "past_key_values", "cache", "labels", "head_mask",
                     "inputs_embeds", "decoder_inputs_embeds"})


def inputs_of_forward_without_main_input(model: Any, params: dict[str, inspect.Parameter], seed: int) -> dict[str, Any]:
    """Inputs of a forward that takes none of the main inputs (trajectories, latents, embeddings):
    every documented tensor it requires, and the optional ones it reads (not masks, not what the
    model derives)."""
    if getattr(model.forward, "__name__", "") == "_forward_unimplemented":
        # generate-only pipelines of several models (Bark, the Qwen Omni wrappers)
        raise generate_only(model)
    required = required_params(params)
    documented = documented_tensors(model.forward, frozenset(required))
    wanted = {name for name in documented if name in params
              and (name in required or ("mask" not in name and name not in DERIVED))}
    inputs = documented_inputs(model, model.config, wanted, seed)
    if not inputs or required - set(inputs):
        raise MissingInputBuilder(f"{type(model).__name__}.forward takes none of {', '.join(MAIN_INPUTS)}"
                                  + (f" and documents no shape for {', '.join(sorted(required - set(inputs)))}"
                                     if required - set(inputs) else ""))
    return inputs
