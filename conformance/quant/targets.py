"""The quant suite's targets: what a recipe is applied to, built on the CPU with random weights
under the run's seed, and the inputs it is run on.

    linear.g32 .g64 .g128   two linears 256 -> 384 -> 128 with bias; the group size 32/64/128
    linear.ragged           200 -> 96 -> 72: in-features not a multiple of the group size (64)
    linear.decode           batch-1 decode: one row
    linear.3d               a (2, 5, 256) input
    linear.no_bias          the two linears without bias
    llama qwen2 mistral     tiny Transformers models from the zoo (conformance/models/zoo.py),
    gpt2 mixtral qwen3_moe  random weights, 8 random tokens; their output is the logits
    vit                     a tiny ViT image classifier from the zoo: one random image, its logits
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

MODEL_GROUP_SIZE = 32


@dataclasses.dataclass
class Target:
    module: torch.nn.Module
    inputs: tuple  # CPU tensors
    group_size: int
    is_model: bool = False

    def call(self, module: torch.nn.Module, inputs: tuple) -> torch.Tensor:
        out = module(*inputs)
        return out.logits if self.is_model else out


def build(name: str, dtype: torch.dtype, seed: int) -> Target:
    """The target `name` in `dtype` on the CPU; KeyError for an unknown name."""
    if name.startswith("linear."):
        return _linear(name.removeprefix("linear."), dtype, seed)
    return _model(name, dtype, seed)


def _linear(kind: str, dtype: torch.dtype, seed: int) -> Target:
    group, bias, sizes, shape = 64, True, (256, 384, 128), (4, 256)
    if kind in ("g32", "g64", "g128"):
        group = int(kind[1:])
    elif kind == "ragged":
        sizes, shape = (200, 96, 72), (4, 200)
    elif kind == "decode":
        shape = (1, 256)
    elif kind == "3d":
        shape = (2, 5, 256)
    elif kind == "no_bias":
        bias = False
    else:
        raise KeyError(f"linear.{kind}")
    torch.manual_seed(seed)
    module = torch.nn.Sequential(torch.nn.Linear(sizes[0], sizes[1], bias=bias),
                                 torch.nn.Linear(sizes[1], sizes[2], bias=bias)).to(dtype)
    x = torch.randn(shape, dtype=torch.float32).to(dtype)
    return Target(module.eval(), (x,), group)


def _model(name: str, dtype: torch.dtype, seed: int) -> Target:
    from conformance.models import zoo

    entry = zoo.catalogue().get(name)
    if entry is None:
        raise KeyError(name)
    model: Any = zoo.build_model(entry, seed=seed).to(dtype)
    generator = torch.Generator().manual_seed(seed)
    if entry.task == "image-classification":
        config = model.config
        pixels = torch.randn((1, config.num_channels, config.image_size, config.image_size), generator=generator)
        return Target(model, (pixels.to(dtype),), MODEL_GROUP_SIZE, is_model=True)
    vocab = int(getattr(model.config, "vocab_size", 0) or getattr(model.config.get_text_config(), "vocab_size"))
    tokens = torch.randint(0, vocab, (1, 8), generator=generator)
    return Target(model, (tokens,), MODEL_GROUP_SIZE, is_model=True)


def to_device(inputs: tuple, device: Any) -> tuple:
    return tuple(t.to(device) for t in inputs)
