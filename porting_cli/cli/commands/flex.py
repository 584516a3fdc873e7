"""`neuron-check flex-attention`: flex attention's score_mod / mask_mod variants checked on a device."""

from __future__ import annotations

from conformance.flex.plan import FlexOptions
from porting_cli.cli.suite_cli import suite_command

HELP = """Check torch.nn.attention.flex_attention on a device: a library of score_mod / mask_mod
variants (causal, sliding window, document masking, ALiBi, soft-capping, block-sparse masks,
GQA, decode, ...), forward (and backward with --grad), eagerly and through
torch.compile(flex_attention), against dense math on the CPU by the numerics rule.

\b
neuron-check flex-attention --device sim --dtype fp32,bf16 --grad
neuron-check flex-attention --device sim --subject 'block_sparse*' --mode eager,compile --dynamic
"""

command = suite_command("flex-attention", FlexOptions, help=HELP, default_timeout=180.0)
