"""How a recipe is applied to a target: torchao's `quantize_`, on a Transformers model with the
module filter Transformers' `TorchAoConfig` uses.

`from_pretrained(..., quantization_config=TorchAoConfig(config))` quantizes, one module at a
time, the weight of every `nn.Linear` whose parameter its `TorchAoHfQuantizer` accepts: not the
output embeddings (`lm_head`), not a tied weight, not the model's last parameter, not its
`_keep_in_fp32_modules`, not the config's `modules_to_not_convert`. Rather than copy that rule,
the filter asks Transformers' own quantizer, parameter by parameter, on the target itself, so it
stays exact as Transformers changes it (tests/conformance/test_quant_apply.py checks it against a
real `from_pretrained` of a saved tiny model). A plain module (the linear stacks) gets every
`nn.Linear`, as `quantize_` does by default.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def module_filter(module: torch.nn.Module, config: Any) -> Callable[[torch.nn.Module, str], bool] | None:
    """`quantize_`'s filter_fn for `module`: Transformers' choice for one of its models, else None
    (quantize_'s default: every nn.Linear)."""
    from transformers import PreTrainedModel

    if not isinstance(module, PreTrainedModel):
        return None
    chosen = transformers_choice(module, config)
    return lambda child, fqn: fqn in chosen


def transformers_choice(model: Any, config: Any, modules_to_not_convert: list[str] | None = None) -> set[str]:
    """Names of the modules whose weight TorchAoConfig(config) quantizes in `model`."""
    from transformers import TorchAoConfig
    from transformers.quantizers.quantizer_torchao import TorchAoHfQuantizer

    quantizer = TorchAoHfQuantizer(TorchAoConfig(quant_type=config, modules_to_not_convert=modules_to_not_convert),
                                   pre_quantized=False)
    quantizer._process_model_before_weight_loading(model)  # settles modules_to_not_convert for this model
    return {name.rpartition(".")[0] for name, _ in model.named_parameters()
            if quantizer.param_needs_quantization(model, name)}


def quantize(module: torch.nn.Module, config: Any, choice: Callable | None) -> None:
    """Apply `config` in place to `module` with `choice` (module_filter's answer)."""
    from torchao.quantization import quantize_

    if choice is None:
        quantize_(module, config)
    else:
        quantize_(module, config, filter_fn=choice)
