"""The world runner: `--jobs` worlds of N rank processes, each running batches of items in lock-step.

An item is done when every rank has reported it; its result is the worst rank's
(conformance/dist/judge.py). An item that some rank started and not every rank finished within
`timeout_s` is TIMEOUT; a rank that dies makes its current item CRASH. Either way the whole
world is killed (each rank's process group, so helpers go too; ranks also die with this
process through PR_SET_PDEATHSIG) and a fresh world takes the items after it.
"""

from __future__ import annotations

import collections
import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from conformance.engine.config import RunConfig
from conformance.dist.judge import worst
from conformance.dist.process_group import RankPlace, rank_device
from conformance.engine.local import POLL_S, START_TIMEOUT_S, EngineError, Executor
from conformance.outcome import signal_name
from op_db.records import Result, Status, WorkItem

BATCH = 8


@dataclasses.dataclass(frozen=True)
class WorldSpec:
    """A world's shape: its size and the device each rank uses."""

    world_size: int
    devices: tuple[str, ...]

    @classmethod
    def for_config(cls, config: RunConfig, adapter: Any) -> "WorldSpec":
        from conformance.dist.plan import DistOptions

        size = config.options_of(DistOptions).world_size
        return cls(size, tuple(rank_device(adapter, config.device, r) for r in range(size)))


class World:
    """Parent-side handle of one world: N rank processes, one pipe each, one store file."""

    def __init__(self, mp: Any, spec: WorldSpec, config: RunConfig, ranks_on_host: int):
        from conformance.dist.rank import rank_main

        self.spec = spec
        self.tmp = tempfile.mkdtemp(prefix="neuron-check-world-")
        store = os.path.join(self.tmp, "store")
        self.conns, self.processes = [], []
        for rank in range(spec.world_size):
            parent, child = mp.Pipe()
            place = RankPlace(rank, spec.world_size, spec.devices[rank])
            process = mp.Process(target=rank_main, args=(child, place, store, config, ranks_on_host), daemon=True)
            process.start()
            child.close()
            self.conns.append(parent)
            self.processes.append(process)
        self.ready = [False] * spec.world_size
        self.spawned_at = time.monotonic()
        self.batch: collections.deque[tuple[int, WorkItem]] = collections.deque()
        self.results: dict[int, dict[int, Result]] = {}
        self.started: dict[int, float] = {}
        self.current: list[int | None] = [None] * spec.world_size

    @property
    def all_ready(self) -> bool:
        return all(self.ready)

    def send(self, message: tuple) -> None:
        for conn in self.conns:
            conn.send(message)

    def waitables(self) -> list[Any]:
        return self.conns + [p.sentinel for p in self.processes]

    def kill(self) -> None:
        """Kill every rank and whatever it started, and wait for them."""
        for process in self.processes:
            if process.pid is None:
                continue
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the rank leads its own group
            except (ProcessLookupError, PermissionError):
                pass
            if process.is_alive():
                process.kill()
        for process in self.processes:
            process.join(10)
        for conn in self.conns:
            conn.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stop(self) -> None:
        try:
            self.send(("stop",))
        except OSError:
            pass
        deadline = time.monotonic() + 30
        for process in self.processes:
            process.join(max(0.1, deadline - time.monotonic()))
        self.kill()


class WorldExecutor(Executor):
    """Runs dist items in `config.jobs` local worlds (the dist suite's engine)."""

    def __init__(self, spec: WorldSpec):
        self.spec = spec

    def start_world(self, mp: Any, config: RunConfig) -> World:
        return World(mp, self.spec, config, self.spec.world_size * max(1, config.jobs))

    def execute(self, items: Sequence[WorkItem], config: RunConfig, emit: Callable[[Result], None]) -> None:
        mp = multiprocessing.get_context("spawn")
        pending = collections.deque(enumerate(items))
        jobs = max(1, min(config.jobs, len(items)))
        worlds = [self.start_world(mp, config) for _ in range(jobs)]
        remaining = len(items)
        start_failures = 0
        try:
            while remaining:
                for world in worlds:
                    if world.all_ready and not world.batch and pending:
                        world.batch.extend(pending.popleft() for _ in range(min(BATCH, len(pending))))
                        world.send(("batch", list(world.batch)))
                waitables = [w for world in worlds for w in world.waitables()]
                multiprocessing.connection.wait(waitables, timeout=POLL_S)
                for position, world in enumerate(worlds):
                    emitted, lost = _drain(world, items, config, emit)
                    remaining -= emitted
                    if lost is None:
                        continue
                    if lost is not False:
                        emit(lost)
                        remaining -= 1
                    if not world.all_ready:
                        start_failures += 1
                        if start_failures >= 3:
                            raise EngineError("the ranks of a world die while starting.")
                    pending.extendleft(reversed(world.batch))
                    world.kill()
                    worlds[position] = self.start_world(mp, config)
                    if emitted:
                        start_failures = 0
            for world in worlds:
                world.stop()
        finally:
            for world in worlds:
                world.kill()


def _drain(world: World, items: Sequence[WorkItem], config: RunConfig,
           emit: Callable[[Result], None]) -> tuple[int, Result | bool | None]:
    """Read every rank's messages; emit finished items. Returns (emitted, lost) where lost is
    None (world healthy), False (world dead between items) or the CRASH/TIMEOUT result."""
    emitted, dead_rank = 0, None
    for rank, conn in enumerate(world.conns):
        try:
            while conn.poll():
                message = conn.recv()
                kind = message[0]
                if kind == "ready":
                    world.ready[rank] = True
                elif kind == "init-error":
                    raise EngineError(f"rank {rank} could not join the world: {message[1]}")
                elif kind == "start":
                    world.current[rank] = message[1]
                    world.started.setdefault(message[1], time.monotonic())
                elif kind == "result":
                    index = message[1]
                    world.current[rank] = None
                    ranks = world.results.setdefault(index, {})
                    ranks[rank] = message[2]
                    if len(ranks) == world.spec.world_size:
                        world.batch.popleft()
                        emit(worst(ranks))
                        emitted += 1
        except (EOFError, OSError):
            dead_rank = rank
        if dead_rank is None and world.processes[rank].exitcode is not None:
            dead_rank = rank
    if not world.all_ready and time.monotonic() - world.spawned_at > START_TIMEOUT_S:
        raise EngineError(f"a world did not start within {START_TIMEOUT_S:g} s.")
    unfinished = world.batch[0] if world.batch else None
    if dead_rank is not None:
        if unfinished is None or unfinished[0] not in world.started:
            return emitted, False  # died between items: a fresh world takes the batch
        world.processes[dead_rank].join(5)
        code = world.processes[dead_rank].exitcode
        message = f"rank {dead_rank} died ({signal_name(code)}) while running this item; its world was killed."
        return emitted, _lost(world, items, Status.CRASH, message, dead_rank)
    if unfinished is not None and unfinished[0] in world.started:
        elapsed = time.monotonic() - world.started[unfinished[0]]
        if elapsed > config.timeout_s:
            late = [r for r in range(world.spec.world_size) if r not in world.results.get(unfinished[0], {})]
            message = (f"the item ran longer than the {config.timeout_s:g} s limit on rank(s) "
                       f"{', '.join(map(str, late))}; the world was killed.")
            return emitted, _lost(world, items, Status.TIMEOUT, message, late[0])
    return emitted, None


def _lost(world: World, items: Sequence[WorkItem], status: Status, message: str, rank: int) -> Result:
    index, item = world.batch.popleft()
    elapsed = time.monotonic() - world.started.get(index, time.monotonic())
    done = {str(r): res.status.value for r, res in world.results.get(index, {}).items()}
    return Result.for_item(item, status, message=message, duration_s=elapsed, extra={"rank": rank, "ranks": done})
