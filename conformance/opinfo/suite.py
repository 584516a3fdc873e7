"""The OpInfo suite as the engine and the CLI see it (conformance/suite.py, `Suite`):
PyTorch's OpInfo database on the device against CPU, `neuron-check ops`."""

from __future__ import annotations

from conformance.planning import OpsOptions
from conformance.suite import ModuleSuite

SUITE = ModuleSuite(name="opinfo", command="ops", options_type=OpsOptions, default_timeout_s=120.0,
                    planner="conformance.opinfo.plan:plan", runner="conformance.opinfo.run")
