"""The Ray executor: the engine's work items on Ray actors, one device each, across nodes.

Same contract as the local pool (conformance/engine/local.py): every item gives exactly one
Result, handed to `emit` in the driver as it finishes, so run_items commits it and moves the
progress bar. `--jobs` actors in the whole cluster (at most as many as its nodes hold), each
owning one device of its node, initialise the backend once (worker.py) and run one item per
remote call; every Result names the node that ran it. The driver times every call, so a hung
item is a TIMEOUT (its actor is killed). When an actor dies under an item, the node decides
(ray_nodes.py): the item's own process died on a healthy node -> CRASH; the node is gone ->
the item goes back to the queue for the surviving nodes, never counted twice. A lost actor is
replaced while items are left; when no node can hold one any more, the run stops
(RunStopped: interrupted, --resume finishes it).

Ray is an optional extra (`pip install neuron-check[ray]`); it is imported only in functions.
"""

from __future__ import annotations

import collections
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from conformance.engine.config import RunConfig
from conformance.engine.local import MAX_START_FAILURES, POLL_S, EngineError, Executor, RunStopped
from conformance.engine.ray_connect import RaySession
from conformance.engine.ray_nodes import NodeWatch, Placement, here
from op_db.errors import InputError
from op_db.records import Result, Status, WorkItem, shorten

# What one actor asks Ray for, by backend name, in Ray's resource names. Ray pins the
# accelerators it knows (GPU, neuron_cores, HPU, NPU) to an actor through the runtime's
# visible-devices variable, so one unit is one device. Neuron hosts advertise
# `neuron_cores` (Ray detects them with neuron-ls, or `ray start --resources
# '{"neuron_cores": 32}'`). CPU-backed devices take a CPU slot per actor.
ACTOR_RESOURCES: dict[str, dict[str, float]] = {
    "cuda": {"CPU": 1, "GPU": 1},
    "xpu": {"CPU": 1, "GPU": 1},  # Ray's Intel GPU support also calls them GPU
    "neuron": {"CPU": 1, "neuron_cores": 1},
    "hpu": {"CPU": 1, "HPU": 1},
    "npu": {"CPU": 1, "NPU": 1},
    "sim": {"CPU": 1},
    "cpu": {"CPU": 1},
    "meta": {"CPU": 1},
}
# Plugins and anything unlisted: a CPU slot, unless $NEURON_CHECK_RAY_RESOURCES (JSON) says what.
DEFAULT_RESOURCES: dict[str, float] = {"CPU": 1}
RESOURCES_ENV = "NEURON_CHECK_RAY_RESOURCES"
# Environment every actor gets from the driver (sim profile and the like); Ray's own
# visible-device variables are set per actor by Ray and must not be copied.
FORWARDED_ENV_PREFIX = "NEURON_CHECK_"


def actor_resources(backend: str) -> dict[str, float]:
    """Ray resources one actor of `backend` needs; InputError for a malformed override."""
    override = os.environ.get(RESOURCES_ENV)
    if override:
        try:
            found = json.loads(override)
            if not isinstance(found, dict) or not all(isinstance(v, (int, float)) and v >= 0 for v in found.values()):
                raise ValueError
        except ValueError:
            raise InputError(f"${RESOURCES_ENV} must be a JSON object of Ray resource amounts, "
                             f'like {{"CPU": 1, "my_device": 1}}; got {override!r}.') from None
        return {str(k): float(v) for k, v in found.items()}
    return dict(ACTOR_RESOURCES.get(backend, DEFAULT_RESOURCES))


def ray_options(resources: dict[str, float]) -> dict[str, Any]:
    """Ray resource names -> the keyword arguments of `.options()` on an actor class."""
    rest = {k: v for k, v in resources.items() if k not in ("CPU", "GPU")}
    options: dict[str, Any] = {"num_cpus": resources.get("CPU", 0), "num_gpus": resources.get("GPU", 0)}
    if rest:
        options["resources"] = rest
    return options


def actor_capacity(cluster: dict[str, float], resources: dict[str, float]) -> int:
    """How many such actors the cluster's total resources hold at once."""
    from conformance.engine.ray_nodes import node_capacity

    return node_capacity(cluster, resources)


def actor_config(config: RunConfig, resources: dict[str, float]) -> RunConfig:
    """The config an actor runs with: a device Ray pins for it is index 0 of what it sees."""
    pinned = any(name not in ("CPU", "memory") for name in resources)
    if pinned and os.environ.get(RESOURCES_ENV) is None:
        return config.with_(device=config.device.split(":", 1)[0])
    return config


def forwarded_env(config: RunConfig, started_here: bool) -> dict[str, str]:
    """Environment of every actor: NEURON_CHECK_* and the sim profile; for a local instance
    (`started_here`), the checkout this driver imports (a cluster's nodes install the package)."""
    env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV_PREFIX) and k != RESOURCES_ENV}
    if config.sim_profile:
        env["NEURON_CHECK_SIM_PROFILE"] = config.sim_profile
    if started_here:
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    return env


class DeviceActor:
    """One Ray actor: owns one device, initialises the backend and suites once, runs items."""

    def __init__(self, config: RunConfig, suites: tuple[str, ...]) -> None:
        import signal
        import warnings

        from conformance.engine.import_noise import silence_known_noise
        from conformance.engine.worker import init_worker, prepare_suites
        from conformance.engine.lifeline import die_with_parent

        die_with_parent()  # the raylet that started us; a local one dies with the driver
        silence_known_noise()
        try:  # Ctrl-C is the driver's to handle, as in the local pool
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:
            pass  # not the main thread of the worker: nothing to ignore
        warnings.simplefilter("ignore")  # OpInfo samples warn a lot; results say what matters
        self.ctx = init_worker(config)
        prepare_suites(self.ctx, suites)

    def ready(self) -> Placement:
        """Where this actor runs, once the backend is up."""
        return here()

    def run(self, item: WorkItem) -> Result:
        from conformance.engine.worker import run_one

        return run_one(item, self.ctx)


class _Slot:
    """Driver-side handle of one actor and the call it is waiting on."""

    def __init__(self, actor: Any, ready_ref: Any) -> None:
        self.actor = actor
        self.ref = ready_ref  # the ready() call until it answers, then the current item's call
        self.ready = False
        self.placement: Placement | None = None  # known once ready
        self.index: int | None = None
        self.started_at = 0.0


class RayExecutor(Executor):
    """Items on `--jobs` Ray actors across the cluster (a private local instance: --jobs CPUs)."""

    def __init__(self) -> None:
        self.session = RaySession()

    def connect(self, config: RunConfig) -> None:
        self.session.open(config.ray_address, config.ray_connect_timeout_s, cpus=config.jobs)

    def close(self) -> None:
        self.session.close()

    def execute(self, items: Sequence[WorkItem], config: RunConfig, emit: Callable[[Result], None]) -> None:
        resources = actor_resources(config.backend)
        opened_here = self.session.ray is None
        ray = self.session.open(config.ray_address, config.ray_connect_timeout_s, cpus=config.jobs)
        pool = None
        try:
            capacity = NodeWatch(ray).capacity(resources)
            if capacity < 1:
                raise InputError(_no_room(config.backend, resources))
            suites = tuple(sorted({item.suite for item in items}))
            pool = _ActorPool(ray, config, resources, suites, self.session.local)
            pool.run(items, emit, size=min(config.jobs, capacity, len(items)))
        finally:
            if pool is not None:
                pool.close()
            if opened_here:
                self.session.close()


def _no_room(backend: str, resources: dict[str, float]) -> str:
    wanted = ", ".join(f"{name} {amount:g}" for name, amount in resources.items())
    device = next((name for name in resources if name != "CPU"), None)
    if device == "GPU":
        hint = "start its workers on hosts with GPUs (ray start --num-gpus N)"
    elif device is not None:
        hint = f"start its workers with ray start --resources '{{\"{device}\": N}}'"
    else:
        hint = "start workers with CPUs"
    return f"the Ray cluster has no room for one {backend} actor ({wanted}); {hint}."


class _ActorPool:
    """The driver's loop: hand each ready actor one item, collect results, replace lost actors,
    and send the items of a lost node back to the queue."""

    def __init__(self, ray: Any, config: RunConfig, resources: dict[str, float], suites: tuple[str, ...],
                 started_here: bool) -> None:
        self.ray = ray
        self.config = config
        self.suites = suites
        self.resources = resources
        options = ray_options(resources)
        options["runtime_env"] = {"env_vars": forwarded_env(config, started_here)}
        self.actor_class = ray.remote(DeviceActor).options(max_restarts=0, max_task_retries=0, **options)
        self.actor_config = actor_config(config, resources)
        self.nodes = NodeWatch(ray)
        self.slots: list[_Slot] = []
        self.pending: collections.deque[int] = collections.deque()
        self.remaining = 0
        self.start_failures = 0
        self.lost_on: dict[int, list[str]] = {}  # item index -> the nodes that died under it

    def _start(self) -> _Slot:
        actor = self.actor_class.remote(self.actor_config, self.suites)
        return _Slot(actor, actor.ready.remote())

    def close(self) -> None:
        for slot in self.slots:
            self.ray.kill(slot.actor, no_restart=True)
        self.slots = []

    def run(self, items: Sequence[WorkItem], emit: Callable[[Result], None], size: int) -> None:
        self.pending = collections.deque(range(len(items)))
        self.remaining = len(items)
        self.slots = [self._start() for _ in range(size)]
        while self.remaining:
            for slot in self.slots:
                if slot.ready and slot.index is None and self.pending:
                    slot.index, slot.started_at = self.pending.popleft(), time.monotonic()
                    slot.ref = slot.actor.run.remote(items[slot.index])
            refs = [slot.ref for slot in self.slots if slot.ref is not None]
            if not refs:  # cannot happen while items remain; never spin on nothing
                raise EngineError("the Ray executor lost track of its items.")
            self.ray.wait(refs, num_returns=1, timeout=POLL_S)
            finished, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
            finished = set(finished)
            for slot in list(self.slots):
                if slot.ref in finished:
                    self._collect(slot, items, emit)
                elif slot.index is not None and _elapsed(slot) > self.config.timeout_s:
                    if self.nodes.lost(slot.placement, TimeoutError()):  # cut off, not hung
                        self._node_lost(slot)
                    else:
                        self._give_up(slot, items[slot.index], emit, Status.TIMEOUT, f"the item ran longer than "
                                      f"the {self.config.timeout_s:g} s limit; its Ray actor was killed.")
            self._check_cluster()

    def _collect(self, slot: _Slot, items: Sequence[WorkItem], emit: Callable[[Result], None]) -> None:
        """Take the answer of the call `slot` waited on: ready, a Result, or a lost actor."""
        from ray.exceptions import OutOfMemoryError, RayActorError, RayError, WorkerCrashedError

        try:
            value = self.ray.get(slot.ref)
        except RayError as exc:
            if not slot.ready:
                self._start_failed(slot, exc)
                return
            if self.nodes.lost(slot.placement, exc):
                self._node_lost(slot)
                return
            if isinstance(exc, (RayActorError, OutOfMemoryError, WorkerCrashedError)):  # its process died
                self._give_up(slot, items[slot.index], emit, Status.CRASH,
                              f"the Ray actor died while running this item: {_gist(exc)}")
                return
            # The call failed but the actor lives (e.g. an unpicklable result).
            value = Result.for_item(items[slot.index], Status.ERROR, duration_s=_elapsed(slot),
                                    message=shorten(f"the Ray call failed: {exc}"))
        if not slot.ready:
            slot.ready, slot.ref, slot.placement = True, None, value
            return
        self.start_failures = 0
        index = slot.index
        slot.ref, slot.index = None, None
        self._emit(emit, index, value, slot)

    def _emit(self, emit: Callable[[Result], None], index: int, result: Result, slot: _Slot) -> None:
        if slot.placement is not None:
            result.node = slot.placement.label
        if index in self.lost_on:
            result.extra = {**result.extra, "rerun_after_node_loss": self.lost_on[index]}
        self.remaining -= 1
        emit(result)

    def _start_failed(self, slot: _Slot, exc: BaseException) -> None:
        """An actor that never became ready: a lost node is no fault of the backend."""
        from ray.exceptions import RayActorError

        if not self.nodes.lost(slot.placement, exc):
            self.start_failures += 1
            if (isinstance(exc, RayActorError) and exc.actor_init_failed) or self.start_failures >= MAX_START_FAILURES:
                raise EngineError(f"the Ray actors cannot start the backend: {_gist(exc)}") from None
        self._replace(slot)

    def _node_lost(self, slot: _Slot) -> None:
        """The node under `slot` is gone: its item goes back to the front of the queue."""
        self.lost_on.setdefault(slot.index, []).append(slot.placement.label if slot.placement else "unknown node")
        self.pending.appendleft(slot.index)
        slot.index = None
        self._replace(slot)

    def _give_up(self, slot: _Slot, item: WorkItem, emit: Callable[[Result], None], status: Status,
                 message: str) -> None:
        """CRASH or TIMEOUT for the item a lost actor held; the actor is replaced."""
        index = slot.index
        result = Result.for_item(item, status, message=message, duration_s=_elapsed(slot))
        self._replace(slot)
        self._emit(emit, index, result, slot)

    def _replace(self, slot: _Slot) -> None:
        self.ray.kill(slot.actor, no_restart=True)
        self.slots.remove(slot)
        if self.pending:
            self.slots.append(self._start())

    def _check_cluster(self) -> None:
        """Stop the run when no actor is up and no live node can hold one: the items left wait
        for --resume, not for a node that may never come back."""
        if any(slot.ready for slot in self.slots):
            return
        if self.nodes.capacity(self.resources) < 1:
            raise RunStopped(f"no node of the Ray cluster is left to run on ({self.remaining} item(s) not run)")


def _elapsed(slot: _Slot) -> float:
    return time.monotonic() - slot.started_at


def _gist(exc: BaseException) -> str:
    """The telling line of a Ray error: the exit detail of a dead worker, the exception of a failed init."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "Worker exit detail:" in line:
            return line[line.index("Worker exit detail:"):].split(". ", 1)[0] + "."
    return shorten(lines[-1] if lines else type(exc).__name__, 300)
