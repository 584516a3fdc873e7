"""The suites the engine can run, by the `suite` field of a WorkItem.

Each suite module provides:
    prepare(ctx: WorkerContext) -> None         once per worker (import op_db, zoo, ...)
    run_item(item: WorkItem, ctx: WorkerContext) -> Result
Both run inside a worker process on the device; neither may touch the store.
"""

from __future__ import annotations

import importlib
from types import ModuleType

SUITE_MODULES = {
    "opinfo": "conformance.opinfo.run",
    "model": "conformance.models.runner",
    "fp8": "conformance.fp8.suite",
}


def load_suite(name: str) -> ModuleType:
    return importlib.import_module(SUITE_MODULES[name])
