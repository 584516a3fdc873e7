"""The worker side of the engine: one process that owns the device and runs items.

`init_worker` and `run_one` are the whole contract an executor needs; the local
process pool (conformance/engine/local.py) drives them through a pipe with
`worker_main`, and another executor (Ray) can call them in its own actors.
"""

from __future__ import annotations

import os
import signal
import time
import traceback
import warnings
from typing import Any, Callable

from conformance.engine.config import RunConfig, WorkerContext
from op_db.records import Result, Status, WorkItem, shorten

# The harness time a worker may have spent without telling the parent (harness_time.py): the
# parent's view of an item's device time is at most this much too high.
HARNESS_REPORT_STEP_S = 0.05


def init_worker(config: RunConfig) -> WorkerContext:
    """Initialise the backend once for this process (sim profile via the environment)."""
    from conformance import backends

    _no_cross_process_bar_lock()
    if config.sim_profile:
        os.environ["NEURON_CHECK_SIM_PROFILE"] = config.sim_profile
    adapter = backends.get(config.backend)
    adapter.init()
    return WorkerContext(config=config, adapter=adapter)


def share_cores(processes: int) -> None:
    """Give torch this process's share of the cores: N processes with every core each would
    oversubscribe the CPU (OpenMP spin-waits), which made a census class 50x slower at -j 2."""
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, processes)))


def _no_cross_process_bar_lock() -> None:
    """tqdm, which torch.fx's interpreter draws in compile mode, makes a multiprocessing RLock on
    first use: a named semaphore that a worker killed at the end of a run never unlinks, so the
    resource tracker warned "1 leaked semaphore objects" after every compile-mode run. A worker
    draws no bars for other processes to share; a thread lock does."""
    try:
        import tqdm
    except ImportError:
        return
    import threading

    tqdm.tqdm.set_lock(threading.RLock())


def _suite(name: str, ctx: WorkerContext) -> Any:
    """The suite (conformance/suite.py), prepared once per worker."""
    from conformance import suite

    found = suite.get(name)
    prepared = ctx.state.setdefault("_prepared", set())
    if name not in prepared:
        found.prepare(ctx)
        prepared.add(name)
    return found


def prepare_suites(ctx: WorkerContext, suites: tuple[str, ...]) -> None:
    """Prepare each suite once, before the first item, so no item's time limit pays for it."""
    for suite in suites:
        _suite(suite, ctx)


def run_one(item: WorkItem, ctx: WorkerContext) -> Result:
    """Run and time one item (its suite is prepared first, untimed); a bug in a suite becomes an
    ERROR result naming it, never a dead worker."""
    started = time.perf_counter()
    try:
        suite = _suite(item.suite, ctx)
        started = time.perf_counter()
        ctx.harness_time.start_item()
        result = suite.run_item(item, ctx)
    except Exception as exc:  # noqa: BLE001 - the suite's own failure, reported per item
        tail = traceback.format_exc(limit=3)
        return Result.for_item(item, Status.ERROR, message=shorten(f"internal error in the {item.suite} suite: "
                                                                   f"{type(exc).__name__}: {exc}\n{tail}"),
                               duration_s=time.perf_counter() - started)
    if not result.duration_s:
        result.duration_s = time.perf_counter() - started
    return result


def worker_main(conn: Any, config: RunConfig | None, suites: tuple[str, ...] = (),
                environ: dict[str, str] | None = None) -> None:
    """Process entry point of the local pool.

    Messages to the parent: ("ready",), ("init-error", text), ("start", index) before each
    item, so the parent can pin a crash or hang on it, ("harness-time", seconds) as the item's
    harness work (not counted by its time limit) grows, and ("result", index, Result).
    From the parent: ("batch", [(index, item), ...]) and ("stop",). A worker started with
    no `config` (prestarted) preloads `suites`, then waits for ("init", config, suites).
    `environ`: the parent's environment, which a worker forked from the preloading server
    (preforked.py) would otherwise not see as it is now (the server's is from its start).
    """
    from conformance.engine import preforked
    from conformance.engine.import_noise import silence_known_noise
    from conformance.engine.lifeline import die_with_parent

    # A worker hung in an op must not outlive a killed parent: a forked worker dies with the
    # server, which dies with the parent.
    die_with_parent(preforked.server_pid())
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    silence_known_noise()
    # Ctrl-C goes to the whole process group: the parent decides what stops, not us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # OpInfo samples warn a lot; results say what matters (fallback tracking records its own).
    warnings.simplefilter("ignore")
    if config is None:
        from conformance.suite import preload_suites

        preload_suites(suites)
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # never used: the parent is gone
        if message[0] != "init":
            return
        _, config, suites = message
    try:
        share_cores(config.jobs)
        ctx = init_worker(config)
        prepare_suites(ctx, suites)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which stops the run
        conn.send(("init-error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready",))
    ctx.harness_time.report = lambda seconds: conn.send(("harness-time", seconds))
    ctx.harness_time.report_step_s = HARNESS_REPORT_STEP_S
    serve_items(conn, lambda item: run_one(item, ctx))


def serve_items(conn: Any, run: Callable[[WorkItem], Result]) -> bool:
    """Answer the parent's batches until it says stop (True) or is gone (False).

    Each item is announced before it runs, so a crash or hang is pinned on that exact item.
    """
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return False
        if message[0] == "stop":
            return True
        for index, item in message[1]:
            try:
                conn.send(("start", index))
                conn.send(("result", index, run(item)))
            except (BrokenPipeError, OSError):
                return False
