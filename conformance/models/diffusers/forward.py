"""What a Diffusers item runs: a denoiser's forward, or an autoencoder's encode then decode.

An autoencoder's inputs carry two dicts, ENCODE (the sample) and DECODE (latents of the shape
its encoder puts out); the output is both halves, `encoded` (the posterior's parameters, or the
latents) and `decoded` (the reconstruction). Backward takes the mean square of every output
tensor as the loss, so every parameter on the path gets a gradient.
"""

from __future__ import annotations

from typing import Any

ENCODE = "encode"
DECODE = "decode"


def is_autoencoder(model: Any) -> bool:
    return callable(getattr(model, "encode", None)) and callable(getattr(model, "decode", None))


def encoded_tensor(output: Any):
    """The tensor an encoder's output stands for: the posterior's parameters (mean and log-variance),
    else the latents."""
    import torch

    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)):
        return encoded_tensor(output[0])
    dist = getattr(output, "latent_dist", None)
    if dist is not None:
        return encoded_tensor(dist)
    for key in ("parameters", "mean", "latents", "latent", "sample", "z"):
        value = getattr(output, key, None)
        value = value() if callable(value) and key == "mean" else value
        if isinstance(value, torch.Tensor):
            return value
    raise TypeError(f"cannot find the latents in the encoder's {type(output).__name__}")


def decoded_tensor(output: Any):
    import torch

    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)):
        return decoded_tensor(output[0])
    return output.sample


def autoencode(model: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"encoded": encoded_tensor(model.encode(**inputs[ENCODE])),
            "decoded": decoded_tensor(model.decode(**inputs[DECODE]))}


def outputs_of(model: Any, inputs: dict[str, Any]) -> Any:
    from conformance.models.outputs import forward_outputs

    if ENCODE in inputs:
        return autoencode(model, inputs)
    return forward_outputs(model(**inputs))


def run_forward(model: Any, inputs: dict[str, Any]) -> Any:
    import torch

    with torch.no_grad():
        return outputs_of(model, inputs)


def run_backward(model: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    import torch
    from torch.utils import _pytree as pytree

    model.zero_grad(set_to_none=True)
    leaves = [t for t in pytree.tree_leaves(outputs_of(model, inputs))
              if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]
    if not leaves:
        raise RuntimeError("no output of the forward depends on a parameter")
    loss = sum(t.float().square().mean() for t in leaves)
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    return {"loss": loss.detach(), "grads": grads}
