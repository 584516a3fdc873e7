"""`neuron-check dist --executor ray`: each world in a Ray placement group, so a fleet runs
`--jobs` worlds at once.

A world is a placement group of N bundles (one rank's Ray resources each, as the engine's Ray
executor asks for one device: conformance/engine/ray.py) and one rank actor per bundle. Rank 0's
actor opens a TCPStore on its node; every actor joins the world on it (conformance/dist/rank.py,
`open_rank`, as a local rank does). The driver sends each item to every rank of a world and
times it: an item not finished by every rank within `--timeout` is TIMEOUT, an actor that dies
on a healthy node makes its item CRASH; either way the world's actors are killed, its placement
group removed, and a fresh world takes the items after it. A world one of whose nodes dies
(conformance/engine/ray_nodes.py) is rerun whole: its item goes back to the queue, a fresh
world (a new placement group, on the surviving nodes) runs it, and the result names the nodes of
the world that ran it. When the live nodes cannot hold a world any more, the run stops
(RunStopped: interrupted, --resume finishes it). Ray is imported only in functions.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from conformance.engine.config import RunConfig
from conformance.dist.judge import worst
from conformance.dist.process_group import RankPlace
from conformance.dist.world import WorldSpec
from conformance.engine.local import MAX_START_FAILURES, POLL_S, START_TIMEOUT_S, EngineError, Executor, RunStopped
from conformance.engine.ray import _gist, actor_config, actor_resources, forwarded_env, ray_options
from conformance.engine.ray_connect import RaySession
from conformance.engine.ray_nodes import NodeWatch, Placement, here
from op_db.errors import InputError
from op_db.records import Result, Status, WorkItem, shorten


class RankActor:
    """One rank of a Ray world: a process of its own, holding its RankContext between items."""

    def __init__(self, config: RunConfig, place: RankPlace, ranks_on_host: int) -> None:
        import signal

        from conformance.engine.lifeline import die_with_parent

        die_with_parent()  # the raylet that started us; a local one dies with the driver
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides what stops
        except ValueError:
            pass
        self.config, self.place, self.ranks_on_host = config, place, ranks_on_host
        self.store: Any = None
        self.rctx: Any = None

    def _store_timeout(self) -> timedelta:
        return timedelta(seconds=2 * self.config.timeout_s + 60)

    def open_store(self) -> tuple[str, int]:
        """Rank 0: host the world's TCPStore on this node, on a port the OS picks."""
        import ray
        import torch.distributed as dist

        host = ray.util.get_node_ip_address()
        self.store = dist.TCPStore(host, 0, self.place.world_size, is_master=True, wait_for_workers=False,
                                   timeout=self._store_timeout())
        return host, self.store.port

    def join(self, address: tuple[str, int]) -> Placement:
        """Join the world; where this rank runs."""
        import torch.distributed as dist

        from conformance.dist.rank import open_rank

        if self.store is None:
            self.store = dist.TCPStore(address[0], address[1], self.place.world_size, is_master=False,
                                       timeout=self._store_timeout())
        self.rctx = open_rank(self.place, self.store, self.config, self.ranks_on_host)
        return here()

    def run(self, item: WorkItem) -> Result:
        from conformance.dist.rank import run_check

        return run_check(item, self.rctx)


@dataclasses.dataclass
class RayWorld:
    """Driver-side handle of one world: its placement group, actors and the calls in flight."""

    group: Any
    actors: list[Any]
    joins: list[Any]
    started_at: float
    ready: bool = False
    index: int | None = None  # the item in flight
    calls: list[Any] = dataclasses.field(default_factory=list)
    item_started_at: float = 0.0
    placements: list[Placement] = dataclasses.field(default_factory=list)  # rank -> where, once joined

    @property
    def label(self) -> str:
        """The nodes (and devices) of the world's ranks, for Result.node."""
        return ", ".join(dict.fromkeys(place.label for place in self.placements))

    def waiting(self) -> list[Any]:
        return self.calls if self.ready else self.joins


class RayWorldExecutor(Executor):
    """Runs dist items in `config.jobs` worlds, each a Ray placement group."""

    def __init__(self, spec: WorldSpec):
        self.spec = spec
        self.session = RaySession()

    def _open(self, config: RunConfig) -> Any:
        # A local instance gets a CPU slot for every rank of every world.
        return self.session.open(config.ray_address, config.ray_connect_timeout_s,
                                 cpus=config.jobs * self.spec.world_size)

    def connect(self, config: RunConfig) -> None:
        self._open(config)

    def close(self) -> None:
        self.session.close()

    def execute(self, items: Sequence[WorkItem], config: RunConfig, emit: Callable[[Result], None]) -> None:
        resources = actor_resources(config.backend)
        jobs = max(1, min(config.jobs, len(items)))
        opened_here = self.session.ray is None
        ray = self._open(config)
        worlds = None
        try:
            if NodeWatch(ray).capacity(resources) < self.spec.world_size:
                wanted = ", ".join(f"{name} {amount:g}" for name, amount in resources.items())
                raise InputError(f"the Ray cluster has no room for a world of {self.spec.world_size} "
                                 f"{config.backend} ranks ({wanted} each).")
            worlds = _Worlds(ray, self.spec, config, resources, self.session.local)
            worlds.run(items, emit, jobs)
        finally:
            if worlds is not None:
                worlds.close()
            if opened_here:
                self.session.close()


class _Worlds:
    """The driver's loop over its worlds: one item in flight per world, lost worlds replaced."""

    def __init__(self, ray: Any, spec: WorldSpec, config: RunConfig, resources: dict[str, float],
                 started_here: bool) -> None:
        self.ray, self.spec, self.config, self.resources = ray, spec, config, resources
        options = ray_options(resources)
        options["runtime_env"] = {"env_vars": forwarded_env(config, started_here)}
        self.actor_class = ray.remote(RankActor)
        self.actor_options = dict(max_restarts=0, max_task_retries=0, **options)
        # Ray pins an accelerator to each actor: every rank sees its own as index 0.
        self.rank_config = actor_config(config, resources)
        self.worlds: list[RayWorld] = []
        self.start_failures = 0
        self.nodes = NodeWatch(ray)
        self.lost_on: dict[int, list[str]] = {}  # item index -> the worlds' nodes that died under it

    def start_world(self) -> RayWorld:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        size = self.spec.world_size
        group = placement_group([dict(self.resources) for _ in range(size)], strategy="PACK")
        actors = []
        for rank in range(size):
            strategy = PlacementGroupSchedulingStrategy(placement_group=group, placement_group_bundle_index=rank)
            place = RankPlace(rank, size, self.rank_config.device)
            actors.append(self.actor_class.options(scheduling_strategy=strategy, **self.actor_options).remote(
                self.rank_config, place, size))
        address = actors[0].open_store.remote()
        joins = [actor.join.remote(address) for actor in actors]  # Ray hands each the resolved address
        return RayWorld(group, actors, joins, time.monotonic())

    def kill(self, world: RayWorld) -> None:
        from ray.util.placement_group import remove_placement_group

        for actor in world.actors:
            self.ray.kill(actor, no_restart=True)
        remove_placement_group(world.group)

    def close(self) -> None:
        for world in self.worlds:
            self.kill(world)
        self.worlds = []

    def run(self, items: Sequence[WorkItem], emit: Callable[[Result], None], jobs: int) -> None:
        pending = collections.deque(range(len(items)))
        remaining = len(items)
        self.worlds = [self.start_world() for _ in range(jobs)]
        while remaining:
            for world in self.worlds:
                if world.ready and world.index is None and pending:
                    world.index, world.item_started_at = pending.popleft(), time.monotonic()
                    world.calls = [actor.run.remote(items[world.index]) for actor in world.actors]
            refs = [ref for world in self.worlds for ref in world.waiting()]
            self.ray.wait(refs, num_returns=1, timeout=POLL_S)
            for position, world in enumerate(list(self.worlds)):
                index = world.index
                result, lost = self._poll(world, items)
                if result is not None:
                    remaining -= 1
                    result.node = world.label or None
                    if index in self.lost_on:
                        result.extra = {**result.extra, "rerun_after_node_loss": self.lost_on[index]}
                    emit(result)
                if lost:
                    if result is None and world.index is not None:
                        pending.appendleft(world.index)  # not judged: a fresh world runs it again
                    self.kill(world)
                    self.worlds[position] = self.start_world()
            size = self.spec.world_size
            if not any(world.ready for world in self.worlds) and self.nodes.capacity(self.resources) < size:
                raise RunStopped(f"the live nodes of the Ray cluster cannot hold a world of {size} "
                                 f"ranks any more ({remaining} item(s) not run)")

    def _poll(self, world: RayWorld, items: Sequence[WorkItem]) -> tuple[Result | None, bool]:
        """(a finished item's result or None, whether the world is lost)."""
        from ray.exceptions import OutOfMemoryError, RayActorError, RayError, WorkerCrashedError

        if not world.ready:
            done, _ = self.ray.wait(world.joins, num_returns=len(world.joins), timeout=0)
            if len(done) == len(world.joins):
                try:
                    world.placements = self.ray.get(world.joins)
                except RayError as exc:
                    if not self.nodes.lost(None, exc):
                        self.start_failures += 1
                        if self.start_failures >= MAX_START_FAILURES:
                            raise EngineError(f"the ranks of a Ray world cannot join it: {_gist(exc)}") from None
                    return None, True
                world.ready = True
            elif time.monotonic() - world.started_at > START_TIMEOUT_S:
                raise EngineError(f"a Ray world did not start within {START_TIMEOUT_S:g} s.")
            return None, False
        if world.index is None:
            return None, False
        item = items[world.index]
        done = set(self.ray.wait(world.calls, num_returns=len(world.calls), timeout=0)[0])
        results: dict[int, Result] = {}
        for rank, ref in enumerate(world.calls):
            if ref not in done:
                continue
            try:
                results[rank] = self.ray.get(ref)
            except RayError as exc:
                if self._node_lost(world, rank, exc):
                    self.lost_on.setdefault(world.index, []).append(world.label)
                    return None, True
                if isinstance(exc, (RayActorError, OutOfMemoryError, WorkerCrashedError)):  # its process died
                    message = (f"rank {rank}'s Ray actor died while running this item ({_gist(exc)}); "
                               "its world was killed.")
                    return self._lost(world, item, Status.CRASH, message, rank, results), True
                results[rank] = Result.for_item(item, Status.ERROR, message=shorten(f"the Ray call failed: {exc}"))
        if len(results) == len(world.calls):
            self.start_failures = 0
            world.index, world.calls = None, []
            return worst(results), False
        if time.monotonic() - world.item_started_at > self.config.timeout_s:
            late = [rank for rank in range(len(world.calls)) if rank not in results]
            message = (f"the item ran longer than the {self.config.timeout_s:g} s limit on rank(s) "
                       f"{', '.join(map(str, late))}; the world was killed.")
            return self._lost(world, item, Status.TIMEOUT, message, late[0], results), True
        return None, False

    def _node_lost(self, world: RayWorld, rank: int, exc: BaseException) -> bool:
        """Did a node of the world die? Its rank's own, or another's (its peers then fail too)."""
        if self.nodes.lost(world.placements[rank], exc):
            return True
        return any(self.nodes.lost(place, exc) for place in world.placements if place != world.placements[rank])

    @staticmethod
    def _lost(world: RayWorld, item: WorkItem, status: Status, message: str, rank: int,
              results: dict[int, Result]) -> Result:
        done = {str(r): res.status.value for r, res in results.items()}
        return Result.for_item(item, status, message=message, duration_s=time.monotonic() - world.item_started_at,
                               extra={"rank": rank, "ranks": done})
