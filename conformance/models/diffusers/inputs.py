"""Inputs of a tiny Diffusers model, by rule from its forward signature and its config.

Every required parameter of `forward` (and the optional ones a diffusion model needs to run its
conditioning paths: text states, pooled projections, rotary ids, guidance, added time ids) is
made by the first rule of `rules.py` that names it, at the sizes of the model's `Geometry`:
noisy latents of the modality's rank (image 4-D, video 5-D, audio 3-D), timesteps, text states
at the config's width, ControlNet conditioning, masks.

Where the signature leaves a layout open (packed patch tokens or a latent image; which config
width the text states have; float or integer timesteps) the candidates are offered in order and
the first one the model's own code accepts on CPU is kept: the layout is measured, not guessed.
"""

from __future__ import annotations

import inspect
import itertools
from typing import Any

from conformance.models.diffusers.geometry import TEXT_WIDTH_KEYS, Geometry, geometry_of
from conformance.models.diffusers.rules import SKIPPED
from conformance.models.documented import MissingInputBuilder

MAX_CANDIDATES = 24
MAX_ALTERNATIVES = 6  # per parameter
# Parameters whose generic rule knows their values better than a docstring's shape (a timestep
# must be a plausible step, not a standard normal).
DOCSTRING_IGNORED = frozenset({"timestep", "timesteps", "timestep_r", "t", "sigma"})


# Where a wrapper of several models (MultiControlNetModel, MultiAdapter) keeps them.
WRAPPED_MODELS = ("nets", "controlnets", "adapters")


# Compression ratios a video or audio codec computes in its constructor from its block lists
# (which blocks downsample in time or space); the config often leaves them None.
MEASURED_RATIOS = ("spatial_compression_ratio", "temporal_compression_ratio")


def config_of(model: Any) -> dict[str, Any]:
    """The model's config; a wrapper's inputs are its wrapped models' (their config first)."""
    own = dict(getattr(model, "config", {}) or {})
    for attr in MEASURED_RATIOS:
        value = getattr(model, attr, None)
        if own.get(attr) is None and isinstance(value, int) and not isinstance(value, bool):
            own[attr] = value
    for attr in WRAPPED_MODELS:
        parts = getattr(model, attr, None)
        if parts is not None and len(parts) and hasattr(parts[0], "config"):
            return {**dict(parts[0].config), **{k: v for k, v in own.items() if not k.startswith("_")}}
    return own


def forward_params(fn: Any) -> dict[str, inspect.Parameter]:
    return {k: p for k, p in inspect.signature(fn).parameters.items()
            if k != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def candidates(model: Any, entry: Any, seed: int, fn: Any = None) -> list[dict[str, Any]]:
    """Input dicts for `fn` (default model.forward), most likely first; raises MissingInputBuilder
    when a required parameter has no rule. The required parameters and the conditioning ones
    (rules.OPTIONAL_WANTED) come first; then every optional parameter a rule builds, for forwards
    whose code needs an input its signature calls optional."""
    config = config_of(model)
    geometry = geometry_of(config)
    fn = fn or model.forward
    params = forward_params(fn)
    widths = _text_widths(config, geometry.text_width)
    wanted = _choices(model, entry, seed, params, config, geometry, widths, fn, every_optional=False)
    found = _expand(wanted)
    every = _choices(model, entry, seed, params, config, geometry, widths, fn, every_optional=True)
    if [n for n, _ in every] != [n for n, _ in wanted]:
        found += _expand(every)[: MAX_CANDIDATES // 2]
    return found


def _choices(model, entry, seed, params, config, geometry, widths, fn, every_optional: bool) -> list[tuple[str, list]]:
    from conformance.models.diffusers.rules import OPTIONAL_WANTED

    fixed = class_inputs(model, config, geometry, seed, params)  # a structure only the class's pipeline makes
    choices: list[tuple[str, list[Any]]] = []
    for name, param in params.items():
        if name in fixed:
            if fixed[name] is not SKIPPED:
                choices.append((name, [fixed[name]]))
            continue
        required = param.default is inspect.Parameter.empty
        if not required and name not in OPTIONAL_WANTED and not every_optional:
            continue
        options = _options(name, model, entry, config, geometry, seed, widths, params, fn)
        if options is None:
            if required:
                raise MissingInputBuilder(f"no rule builds the required input {name!r} of "
                                          f"{type(model).__name__}.forward")
            continue
        choices.append((name, options))
    if "return_dict" in params:
        choices.append(("return_dict", [False]))
    return choices


def _options(name, model, entry, config, geometry, seed, widths, params, fn) -> list[Any] | None:
    """A parameter's options: the docstring's shape first, then the generic rule's."""
    from conformance.models.diffusers.docshapes import docstring_option
    from conformance.models.diffusers.rules import build_choices

    generic = build_choices(name, model, config, geometry, entry.modality, seed, widths, params)
    documented = None if name in DOCSTRING_IGNORED else docstring_option(name, fn, model, config, geometry, seed)
    if documented is None:
        return generic
    return documented + (generic or [])


def _expand(choices: list[tuple[str, list]]) -> list[dict[str, Any]]:
    return [{name: options[i] for (name, options), i in zip(choices, picks) if options[i] is not SKIPPED}
            for picks in _nearest_first([len(options) for _, options in choices])]


def _nearest_first(sizes: list[int]) -> list[tuple[int, ...]]:
    """Index tuples into options lists, the first options first, then one alternative at a time,
    then two...: each parameter's alternatives are tried before combinations of them."""
    ranked = sorted(itertools.product(*[range(min(n, MAX_ALTERNATIVES)) for n in sizes]),
                    key=lambda picks: (sum(1 for i in picks if i), sum(picks)))
    return ranked[:MAX_CANDIDATES]


def _text_widths(config: dict[str, Any], first: int | None) -> list[int]:
    widths = [first] if first else []
    for key in TEXT_WIDTH_KEYS:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0 and value not in widths:
            widths.append(value)
    return widths[:3] or [32]


def choose(model: Any, run: Any, options: list[dict[str, Any]]) -> dict[str, Any]:
    """The first of `options` on which `run(model, inputs)` succeeds on CPU; else re-raises the
    first option's failure (the most likely layout says most about why)."""
    import torch

    first_error = None
    for inputs in options:
        try:
            with torch.no_grad():
                run(model, inputs)
            return inputs
        except Exception as exc:  # noqa: BLE001 - not this layout
            first_error = first_error or exc
    if first_error is None:
        raise MissingInputBuilder(f"no inputs for {type(model).__name__}")
    raise MissingInputBuilder(f"no input layout the forward accepts; the most likely one fails with "
                              f"{type(first_error).__name__}: {first_error}") from first_error


def class_inputs(model: Any, config: dict[str, Any], g: Geometry, seed: int, params: dict[str, Any]) -> dict[str, Any]:
    """The inputs this class's entry fixes (parameter -> value, or SKIPPED); {} without an entry."""
    from conformance.models.diffusers.pipeline_inputs import Context
    from conformance.models.diffusers.rules_codecs import CODEC_INPUTS
    from conformance.models.diffusers.rules_transformers import CLASS_INPUTS
    from conformance.models.diffusers.rules_video import VIDEO_INPUTS

    rule = {**CLASS_INPUTS, **VIDEO_INPUTS, **CODEC_INPUTS}.get(type(model).__name__)
    return rule(Context(model, config, g, seed, params)) if rule else {}
