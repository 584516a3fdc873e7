"""`neuron-check ops`: PyTorch's OpInfo database (and the FP8 suite) on a backend, judged against CPU."""

from __future__ import annotations

from conformance.planning import OpsOptions
from porting_cli.cli.suite_cli import suite_command

HELP = """Run OpInfo ops on a device and compare every sample with CPU.

\b
neuron-check ops --device sim --ops add,mul --dtype fp32,bf16
neuron-check ops --device neuron --jobs 4 --grad --junit ops.xml --fail-on MISMATCH,ERROR
neuron-check ops --resume 12
"""


def _store_coverage(store, run_id: int, adapter) -> None:
    """Dispatcher registrations are stored with every ops run (`neuron-check coverage`)."""
    from op_db.inventory import store_coverage

    store_coverage(store, run_id, adapter)


command = suite_command("ops", OpsOptions, help=HELP, default_timeout=120.0, after_start=_store_coverage)
