"""The Transformers model suite as the engine and the CLI see it (conformance/suite.py, `Suite`):
tiny Transformers models of every architecture on the device against CPU, `neuron-check models`."""

from __future__ import annotations

from conformance.models.plan import SUITE as NAME
from conformance.models.plan import ModelOptions
from conformance.suite import ModuleSuite

SUITE = ModuleSuite(name=NAME, command="models", options_type=ModelOptions, default_timeout_s=300.0,
                    planner="conformance.models.plan:plan", runner="conformance.models.runner")
