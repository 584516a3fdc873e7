"""`neuron-check quant`: torchao's quantization recipes and low-precision training on a device."""

from __future__ import annotations

from conformance.quant.plan import QuantOptions
from porting_cli.cli.suite_cli import suite_command

HELP = """Check torchao recipes on a device against the same recipe on the CPU: int8/int4/intx/float8
quantize_ configs on linear stacks and tiny Transformers models, QAT fake quantization, float8
training and the low-bit optimizers (docs/quant.md). Needs torchao (pip install 'neuron-check[quant]').

\b
neuron-check quant --device sim --dtype bf16
neuron-check quant --recipe 'int8_*' --target 'linear.*,llama' --dtype fp32
neuron-check quant --grad --recipe 'qat_*,float8_training,adamw_*'
"""

command = suite_command("quant", QuantOptions, help=HELP, default_timeout=180.0)
