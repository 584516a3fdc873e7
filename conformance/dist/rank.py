"""One rank process of a world: join the world, then run each batch of items in lock-step.

Messages to the parent (one pipe per rank): ("ready",), ("init-error", text), ("start", index)
and ("result", index, Result) for each item. From the parent: ("batch", [(index, item), ...])
and ("stop",). Every rank of a world gets the same batches, so all issue the same collectives
in the same order.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
import traceback
from typing import Any

from conformance.engine.config import RunConfig
from conformance.engine.lifeline import die_with_parent
from conformance.dist.process_group import RankPlace, join_world
from conformance.engine.item_log import ItemLog
from op_db.records import Result, Status, WorkItem, shorten



@dataclasses.dataclass
class RankContext:
    """What a rank holds for its world's lifetime."""

    rank: int
    world_size: int
    device: str
    adapter: Any
    config: RunConfig
    cpu_group: Any  # the gloo group the references run on
    state: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def seed(self) -> int:
        return self.config.seed


def lead_process_group() -> None:
    """Lead a process group of our own, which the runner kills whole (helpers included)."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass


def check_module(subject: str) -> Any:
    """The module whose `run_item(item, rctx)` checks this subject."""
    from conformance.dist import collectives, dtensor_ops, parity, streams

    head = subject.split(".", 1)[0]
    return {"parity": parity, "streams": streams, "dtensor": dtensor_ops}.get(head, collectives)


def run_check(item: WorkItem, rctx: RankContext) -> Result:
    """One item on this rank; a bug in a check is an ERROR naming it, never a dead rank."""
    started = time.perf_counter()
    log = rctx.state.get("log")
    if log is not None:
        log.take()  # what the last item's teardown said is not this item's
    try:
        result = check_module(item.subject).run_item(item, rctx)
    except Exception as exc:  # noqa: BLE001 - reported per item
        tail = traceback.format_exc(limit=3)
        result = Result.for_item(item, Status.ERROR, message=shorten(
            f"internal error in the dist suite: {type(exc).__name__}: {exc}\n{tail}"))
    if not result.duration_s:
        result.duration_s = time.perf_counter() - started
    return log.attach(result) if log is not None else result


def open_rank(place: RankPlace, store: Any, config: RunConfig, ranks_on_host: int) -> RankContext:
    """Initialise the backend in this process and join the world on `store` as `place.rank`."""
    from conformance.engine.worker import init_worker, share_cores

    log = ItemLog()  # torch's C++ warnings, DTensor's and the process group's go to the item, not the terminal
    share_cores(ranks_on_host)
    adapter = init_worker(config.with_(device=place.device)).adapter
    # Collectives must not time out before the parent's per-item limit does.
    cpu_group = join_world(adapter, store, place, timeout_s=2 * config.timeout_s + 60)
    rctx = RankContext(place.rank, place.world_size, place.device, adapter, config, cpu_group)
    rctx.state["log"] = log
    return rctx


def rank_main(conn: Any, place: RankPlace, store_path: str, config: RunConfig, ranks_on_host: int) -> None:
    die_with_parent()
    lead_process_group()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what stops
    try:
        import torch.distributed as dist

        rctx = open_rank(place, dist.FileStore(store_path, place.world_size), config, ranks_on_host)
    except BaseException as exc:  # noqa: BLE001 - the parent stops the run with this text
        conn.send(("init-error", f"{type(exc).__name__}: {exc}"))
        return
    from conformance.engine.worker import serve_items

    conn.send(("ready",))
    if not serve_items(conn, lambda item: run_check(item, rctx)):
        return  # the parent is gone: nobody is left to tear the world down with
    dist.destroy_process_group()
