"""A Diffusers item made ready for the model runner: the tiny model and its inputs.

The runner (conformance/models/runner.py) does the rest as for a Transformers model: CPU
reference, float64 oracle, the device run, the numerics rule, the first divergent module.
"""

from __future__ import annotations

from typing import Any

from conformance.models.diffusers.forward import DECODE, ENCODE, encoded_tensor, is_autoencoder, run_forward


def make_inputs(model: Any, entry: Any, seed: int) -> dict[str, Any]:
    """The inputs the model's code accepts (measured on CPU); an autoencoder's are its encode and
    decode inputs."""
    from conformance.models.diffusers.inputs import candidates, choose

    if is_autoencoder(model):
        return _autoencoder_inputs(model, entry, seed)
    return choose(model, run_forward, candidates(model, entry, seed))


def _autoencoder_inputs(model: Any, entry: Any, seed: int) -> dict[str, Any]:
    import torch

    from conformance.models.diffusers.inputs import candidates, choose
    from conformance.models.diffusers.rules import _randn

    encode = choose(model, lambda m, i: encoded_tensor(m.encode(**i)), candidates(model, entry, seed, model.encode))
    with torch.no_grad():
        latents = encoded_tensor(model.encode(**encode))
    # the encoder may put out the posterior's mean and log-variance stacked: latents are half of it
    shapes = [tuple(latents.shape)]
    if latents.dim() > 1 and latents.shape[1] % 2 == 0:
        shapes.append((latents.shape[0], latents.shape[1] // 2, *latents.shape[2:]))
    if _latent_channels(model) == latents.shape[1] // 2:
        shapes.reverse()
    decode_params = candidates(model, entry, seed, model.decode)
    decode_options = [{**{k: v for k, v in option.items() if k not in ("z", "h", "sample", "latents", "x")},
                       _decode_arg(model): _randn(shape, seed + 1)} for shape in shapes for option in decode_params]
    decode = choose(model, lambda m, i: m.decode(**i), decode_options)
    return {ENCODE: encode, DECODE: decode}


def _latent_channels(model: Any) -> int | None:
    from conformance.models.diffusers.geometry import first_int

    return first_int(dict(model.config), ("latent_channels", "z_channels", "z_dim", "latent_dim", "embed_dim"))


def _decode_arg(model: Any) -> str:
    from conformance.models.diffusers.inputs import forward_params

    return next(iter(forward_params(model.decode)))
