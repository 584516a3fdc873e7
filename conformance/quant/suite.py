"""The quant suite: torchao recipes on a device against the same recipe on the CPU (docs/quant.md)."""

from __future__ import annotations

from conformance.quant.plan import QuantOptions
from conformance.suite import ModuleSuite

SUITE = ModuleSuite(name="quant", command="quant", options_type=QuantOptions, default_timeout_s=180.0,
                    planner="conformance.quant.plan:plan", runner="conformance.quant.run")
