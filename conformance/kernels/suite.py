"""The custom-kernel suite as the engine and the CLI see it: `neuron-check kernels TARGET`."""

from __future__ import annotations

from conformance.kernels.plan import SUITE as NAME
from conformance.kernels.plan import KernelOptions
from conformance.suite import ModuleSuite

SUITE = ModuleSuite(name=NAME, command="kernels", options_type=KernelOptions, default_timeout_s=180.0,
                    planner="conformance.kernels.plan:plan", runner="conformance.kernels.run")
