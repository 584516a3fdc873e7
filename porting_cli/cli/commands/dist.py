"""`neuron-check dist`: collectives, training-step parity and streams on N ranks of a backend."""

from __future__ import annotations

from conformance.dist.plan import DistOptions
from porting_cli.cli.suite_cli import suite_command

HELP = """Start N ranks on this host with the device's process-group backend (sim: gloo underneath)
and check collectives x dtypes x layouts, 2 training steps of each parity way (DDP, FSDP2, TP, PP,
ZeRO, ...; --ways) against one CPU process, and stream/event ordering. --jobs runs that many worlds at once.

\b
neuron-check dist --device sim --world-size 2
neuron-check dist --device sim --sim-profile faults.json --parts collectives --fail-on MISMATCH
neuron-check dist --device cuda --world-size 4 --junit dist.xml --fail-on MISMATCH,ERROR,CRASH,TIMEOUT
neuron-check dist --resume 12
"""

command = suite_command("dist", DistOptions, help=HELP, default_timeout=120.0)
