"""torchao's inference recipes as `quantize_` configs, and the float64 oracle of a quantized module.

The oracle is the dequantized computation in float64: every quantized linear becomes
F.linear(a, w, b) in float64 with w the CPU's dequantized weight and a the input, fake-quantized
first by torchao's own activation quantization (on the CPU, in the activation dtype) where the
recipe quantizes activations dynamically. The rest of the model runs in float64.
"""

from __future__ import annotations

import copy
from typing import Any

import torch


def config(recipe: str, group_size: int) -> Any:
    """The `quantize_` config of an inference recipe (KeyError for another name)."""
    from torchao.quantization import (
        Float8DynamicActivationFloat8WeightConfig, Float8WeightOnlyConfig, Int4WeightOnlyConfig,
        Int8DynamicActivationInt8WeightConfig, Int8DynamicActivationIntxWeightConfig, Int8WeightOnlyConfig,
        IntxWeightOnlyConfig,
    )
    from torchao.quantization.granularity import PerGroup, PerRow, PerTensor

    family, _, layout = recipe.partition(".")
    if recipe == "int8_weight_only":
        return Int8WeightOnlyConfig()
    if recipe == "int8_dynamic_int8_weight":
        return Int8DynamicActivationInt8WeightConfig()
    if family == "int4_weight_only":
        from torchao.quantization.quantize_.workflows.int4.int4_packing_format import Int4PackingFormat

        return Int4WeightOnlyConfig(group_size=group_size, int4_packing_format=Int4PackingFormat(layout))
    if recipe == "intx_weight_only":
        return IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(group_size))
    if recipe == "int8_dynamic_intx_weight":
        return Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(group_size))
    if recipe == "float8_weight_only":
        return Float8WeightOnlyConfig()
    if family == "float8_dynamic":
        return Float8DynamicActivationFloat8WeightConfig(granularity={"per_tensor": PerTensor(),
                                                                      "per_row": PerRow()}[layout])
    raise KeyError(recipe)


def quantized_weights(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Parameter name -> the torchao tensor subclass quantize_ put there."""
    return {name: p for name, p in module.named_parameters() if _is_quantized(p)}


def _is_quantized(t: torch.Tensor) -> bool:
    return type(t) not in (torch.Tensor, torch.nn.Parameter) and hasattr(t, "__tensor_flatten__")


def inner_tensors(t: torch.Tensor) -> dict[str, torch.Tensor]:
    """The plain tensors a torchao tensor holds (qdata, scale, zero_point, packed weights)."""
    names = t.__tensor_flatten__()[0]
    return {name: getattr(t, name) for name in names if isinstance(getattr(t, name), torch.Tensor)}


class Oracle64Linear(torch.nn.Module):
    """A quantized linear's float64 oracle: the dequantized weight, the activation fake-quantized
    by torchao's own dynamic quantization in the activation dtype when the recipe has one."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, act_dtype: torch.dtype):
        super().__init__()
        self.weight64 = weight.dequantize().to(torch.float64)
        self.bias64 = bias.detach().to(torch.float64) if bias is not None else None
        self.act = _activation_quant(weight)
        self.act_dtype = act_dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.act is not None:
            x = self.act(x.to(self.act_dtype)).to(torch.float64)
        return torch.nn.functional.linear(x.to(torch.float64), self.weight64, self.bias64)


def _activation_quant(weight: torch.Tensor) -> Any:
    """x -> dequantize(quantize(x)) as the recipe's linear does to its input; None for weight-only."""
    kwargs = getattr(weight, "act_quant_kwargs", None)
    if kwargs is not None:
        from torchao.quantization.quantize_.common.quantize_tensor_kwargs import (
            _choose_quant_func_and_quantize_tensor,
        )

        return lambda x: _choose_quant_func_and_quantize_tensor(x, kwargs).dequantize()
    if getattr(weight, "activation_quantization", None) is not None:
        from torchao.quantization.quantize_.workflows.intx import intx_unpacked_to_int8_tensor as intx

        return intx._apply_int8_act_asym_per_token_quant_dequant
    return None


def oracle_module(quantized: torch.nn.Module, act_dtype: torch.dtype) -> torch.nn.Module:
    """A float64 copy of the CPU's quantized module with every quantized linear as its oracle."""
    oracle = copy.deepcopy(quantized)
    for name, child in list(oracle.named_modules()):
        if isinstance(child, torch.nn.Linear) and _is_quantized(child.weight):
            parent_name, _, attr = name.rpartition(".")
            parent = oracle.get_submodule(parent_name) if parent_name else oracle
            setattr(parent, attr, Oracle64Linear(child.weight, child.bias, act_dtype))
    return oracle.to(torch.float64)
