"""Explicit configuration passed from the command line down to every worker."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from conformance.compiling.settings import CompileSettings
from conformance.engine.harness_time import HarnessTime

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything a worker needs to run items; picklable, so spawned workers get it whole."""

    backend: str  # adapter name, e.g. "sim", "cuda", "neuron"
    device: str  # full device string, e.g. "sim", "cuda:1"
    compile: CompileSettings = CompileSettings()  # compile-mode items: backend (None: the adapter's) and options
    jobs: int = 1
    timeout_s: float = 120.0
    seed: int = 0
    sim_profile: str | None = None  # path; workers also inherit NEURON_CHECK_SIM_PROFILE
    executor: str = "local"  # "local" or "ray"
    ray_address: str | None = None
    ray_connect_timeout_s: float = 30.0  # joining the cluster at ray_address, then one sentence and exit 2
    # The command's options dataclass (planning.OpsOptions, models.plan.ModelOptions, a plugin's):
    # what the suites read in the workers (max samples, attention implementation, ...). An item's
    # mode is the item's own (WorkItem.mode), never the run's.
    suite_options: Any = None

    def with_(self, **changes: Any) -> "RunConfig":
        return dataclasses.replace(self, **changes)

    def options_of(self, options_type: type[T]) -> T:
        """The run's suite options if they are of `options_type`, else that type's defaults."""
        if isinstance(self.suite_options, options_type):
            return self.suite_options
        return options_type()


@dataclasses.dataclass
class WorkerContext:
    """What one worker process holds for its lifetime: the backend, once initialised,
    and per-suite state (each suite's `prepare` fills `state[suite_name]`)."""

    config: RunConfig
    adapter: Any  # conformance.backends.BackendAdapter
    state: dict[str, Any] = dataclasses.field(default_factory=dict)
    # The harness's own time in the current item (CPU reference, oracle, comparisons), which the
    # item's time limit does not count; the local pool's workers report it to the parent.
    harness_time: HarnessTime = dataclasses.field(default_factory=HarnessTime)

    @property
    def device(self) -> str:
        return self.config.device

    @property
    def device_type(self) -> str:
        return self.config.device.split(":", 1)[0] if self.config.backend != "privateuseone" else self.adapter.device_type

    @property
    def compile_backend(self) -> str:
        return self.config.compile.backend or self.adapter.compile_backend
