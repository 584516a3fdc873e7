"""The Transformers model suite as the engine and the CLI see it (conformance/suite.py, `Suite`)."""

from __future__ import annotations

from typing import Any

from conformance.models.plan import SUITE, ModelOptions
from op_db.records import Result, WorkItem


class ModelSuite:
    """Tiny Transformers models of every architecture on the device against CPU: `neuron-check models`."""

    name = SUITE
    command = "models"
    options_type = ModelOptions
    default_timeout_s = 300.0

    def plan(self, options: ModelOptions) -> list[WorkItem]:
        from conformance.models.plan import plan

        return plan(options)

    def preload(self) -> None:
        pass

    def prepare(self, ctx: Any) -> None:
        from conformance.models.runner import prepare

        prepare(ctx)

    def run_item(self, item: WorkItem, ctx: Any) -> Result:
        from conformance.models.runner import run_item

        return run_item(item, ctx)
