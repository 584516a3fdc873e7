"""The OpInfo suite as the engine and the CLI see it (conformance/suite.py, `Suite`)."""

from __future__ import annotations

from typing import Any

from conformance.planning import OpsOptions
from op_db.records import Result, WorkItem

SUITE = "opinfo"


class OpInfoSuite:
    """PyTorch's OpInfo database on the device against CPU: `neuron-check ops`."""

    name = SUITE
    command = "ops"
    options_type = OpsOptions
    default_timeout_s = 120.0

    def plan(self, options: OpsOptions) -> list[WorkItem]:
        from conformance.opinfo.plan import plan

        return plan(options)

    def preload(self) -> None:
        """The slow import (seconds), done by a prestarted worker before it knows its run."""
        import torch.testing._internal.common_methods_invocations  # noqa: F401

    def prepare(self, ctx: Any) -> None:
        """Import PyTorch's op database once per worker and index it by full name."""
        import torch
        from torch.testing._internal.common_methods_invocations import op_db

        # OpInfo samples are tiny tensors: intra-op threads buy nothing there, and their OpenMP
        # barriers cost 10-20x on kernels like max_pool2d when the cores are busy (other workers,
        # other jobs), so one thread per worker; the worker count is what uses the cores.
        torch.set_num_threads(1)
        _skip_test_case_lookup()
        ctx.state[SUITE] = {op.full_name: op for op in op_db}

    def run_item(self, item: WorkItem, ctx: Any) -> Result:
        from conformance.opinfo.run import run_item

        return run_item(item, ctx)


def _no_test_case() -> None:
    return None


def _skip_test_case_lookup() -> None:
    """OpInfo's sample generators look for the unittest.TestCase that called them (for its
    sample-specific skips and input tracking) with inspect.stack(), which reads the source of
    every frame: ~5 ms per item, more than many items' whole run. No TestCase ever calls them
    here, so the lookup's answer is always None; give it without walking the stack."""
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    for module in (common_utils, core):
        if hasattr(module, "extract_test_fn"):
            module.extract_test_fn = _no_test_case
