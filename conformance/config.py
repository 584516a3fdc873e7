"""Explicit configuration passed from the command line down to every worker."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything a worker needs to run items; picklable, so spawned workers get it whole."""

    backend: str  # adapter name, e.g. "sim", "cuda", "neuron"
    device: str  # full device string, e.g. "sim", "cuda:1"
    mode: str = "eager"  # "eager" or "compile"
    compile_backend: str | None = None  # None: the adapter's own torch.compile backend
    jobs: int = 1
    timeout_s: float = 120.0
    seed: int = 0
    max_samples: int | None = None
    reference_inputs: bool = False
    sim_profile: str | None = None  # path; workers also inherit NEURON_CHECK_SIM_PROFILE
    executor: str = "local"  # "local" or "ray"
    ray_address: str | None = None
    options: dict[str, Any] = dataclasses.field(default_factory=dict)  # suite-specific

    def with_(self, **changes: Any) -> "RunConfig":
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass
class WorkerContext:
    """What one worker process holds for its lifetime: the backend, once initialised,
    and per-suite state (each suite's `prepare` fills `state[suite_name]`)."""

    config: RunConfig
    adapter: Any  # conformance.backends.BackendAdapter
    state: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def device(self) -> str:
        return self.config.device

    @property
    def device_type(self) -> str:
        return self.config.device.split(":", 1)[0] if self.config.backend != "privateuseone" else self.adapter.device_type

    @property
    def compile_backend(self) -> str:
        return self.config.compile_backend or self.adapter.compile_backend
