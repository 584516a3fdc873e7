"""`neuron-check kernels TARGET`: the custom ops a kernel library registers, checked on a device."""

from __future__ import annotations

from conformance.kernels.plan import KernelOptions
from porting_cli.cli.suite_cli import suite_command

HELP = """Check the custom ops TARGET registers (a Python file or an importable module) on a device:
opcheck's registration tests, then forward (and backward with --grad) against the op's
reference by the numerics rule, eagerly and inside torch.compile(fullgraph=True).

\b
neuron-check kernels examples/kernels/target.py --device sim --dtype fp32,bf16
neuron-check kernels mylib.kernels --op 'mylib::*attention*' --family attention --grad --mode eager,compile
"""

command = suite_command("kernels", KernelOptions, help=HELP, default_timeout=180.0)
