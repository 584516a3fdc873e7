"""The distributed suite as the engine and the CLI see it (conformance/suite.py, `Suite`).

Its items need a world of ranks, not one worker: `make_executor` gives the command the world
runner (conformance/dist/world.py, or conformance/dist/ray_world.py for `--executor ray`) after
checking the world size against the backend, and
`run_item` in a plain worker refuses.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from conformance.dist import SUITE as NAME
from conformance.dist.plan import DistOptions
from op_db.records import Result, WorkItem


@dataclasses.dataclass(frozen=True)
class DistSuite:
    name: str = NAME
    command: str | None = "dist"
    options_type: type = DistOptions
    default_timeout_s: float = 120.0

    def plan(self, options: DistOptions) -> list[WorkItem]:
        from conformance.dist.plan import plan

        return plan(options)

    def preload(self) -> None:
        pass

    def prepare(self, ctx: Any) -> None:
        pass

    def run_item(self, item: WorkItem, ctx: Any) -> Result:
        raise RuntimeError("dist items run in a world of ranks (conformance.dist.world), not in one worker.")

    def make_executor(self, config: Any, adapter: Any) -> Any:
        """The world runner for this run; InputError for a world the backend cannot hold."""
        from conformance.dist.process_group import backend_for, check_world_size
        from conformance.dist.world import WorldExecutor, WorldSpec
        from op_db.errors import InputError

        options = config.options_of(DistOptions)
        backend_for(adapter)
        if config.executor == "ray":
            from conformance.dist.ray_world import RayWorldExecutor
            from conformance.engine.ray_connect import import_ray

            import_ray()  # no Ray: one sentence, exit 2, before anything starts
            check_world_size(options.world_size, adapter, on_this_host=False)
            # Each rank's device is the one Ray pins for its actor.
            return RayWorldExecutor(WorldSpec(options.world_size, (config.device,) * options.world_size))
        if config.executor != "local":
            raise InputError(f"`neuron-check dist` has no executor {config.executor!r}; use local or ray.")
        check_world_size(options.world_size, adapter)
        return WorldExecutor(WorldSpec.for_config(config, adapter))


SUITE = DistSuite()
