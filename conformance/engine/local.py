"""Work items -> isolated worker processes -> results in the store (DESIGN.md, "Data flow").

Suite-agnostic: an item is dispatched by `item.suite` (conformance/suite.py)
inside a worker. The public entry point is

    run_items(items, config, store, run_id, *, progress=True, executor=None) -> RunSummary

which commits every Result as it arrives (one transaction each) and stops
cleanly on Ctrl-C, keeping everything done. Where items run is an `Executor`:
`LocalExecutor` is a pool of worker processes on this machine (forked from a server that
has imported the suites, conformance/engine/preforked.py); another
executor (Ray) implements the same one method and is picked by
`RunConfig.executor` through `EXECUTORS`.
"""

from __future__ import annotations

import abc
import collections
import dataclasses
import importlib
import multiprocessing
import multiprocessing.connection
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from conformance.engine.config import RunConfig
from conformance.engine.progress import Estimate, Progress, is_terminal
from conformance.outcome import signal_name
from op_db.errors import NeuronCheckError
from op_db.records import Result, Status, WorkItem

# Executor name -> "module:Class"; loaded only when used.
EXECUTORS = {
    "local": "conformance.engine.local:LocalExecutor",
    "inline": "conformance.engine.local:InlineExecutor",
    "ray": "conformance.engine.ray:RayExecutor",
}
MAX_BATCH = 8
POLL_S = 0.25
# A worker that cannot even start this often in a row means the backend is broken, not an item.
MAX_START_FAILURES = 3
# How long a worker may take to import and initialise the backend and suites.
START_TIMEOUT_S = 600.0


class EngineError(NeuronCheckError):
    """The workers cannot run at all (the backend fails to initialise in them)."""


class RunStopped(NeuronCheckError):
    """The executor can go no further though nothing is wrong with the run (every node of a Ray
    cluster is gone): the run is marked interrupted, what is done is kept, --resume finishes it."""


@dataclasses.dataclass
class RunSummary:
    run_id: int
    planned: int
    done: int = 0
    counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    samples: int = 0
    op_time_s: float = 0.0
    wall_s: float = 0.0
    interrupted: bool = False
    signal: int = 0  # what interrupted it: SIGINT (Ctrl-C) or SIGTERM (conformance/engine/lifeline.py)
    stopped: str = ""  # or why the executor stopped (RunStopped), when no signal did

    def add(self, result: Result) -> None:
        self.done += 1
        self.counts[result.status.value] += 1
        self.samples += result.samples
        self.op_time_s += float(result.extra.get("op_time_s", 0.0) or 0.0)


class Executor(abc.ABC):
    """Runs items somewhere and hands each Result back in the parent process."""

    def connect(self, config: RunConfig) -> None:
        """Reach where the items will run (a Ray cluster) before the run is recorded, so an
        unreachable one is an InputError and no run; `execute` connects itself when not done."""

    def close(self) -> None:
        """Let go of what `connect` reached (a Ray instance this process started or joined)."""

    @abc.abstractmethod
    def execute(self, items: Sequence[WorkItem], config: RunConfig, emit: Callable[[Result], None]) -> None:
        """Call `emit` exactly once per item (CRASH/TIMEOUT for items whose worker died or
        hung), in the calling process. On KeyboardInterrupt: stop all workers, then re-raise.
        RunStopped when it cannot go on (the items not emitted are left for --resume)."""


def get_executor(config: RunConfig) -> Executor:
    spec = EXECUTORS.get(config.executor)
    if spec is None:
        from op_db.errors import InputError

        raise InputError(f"unknown executor {config.executor!r}; known: {', '.join(EXECUTORS)}.")
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)()


def run_items(items: Sequence[WorkItem], config: RunConfig, store: Any, run_id: int, *,
              progress: bool = True, executor: Executor | None = None) -> RunSummary:
    """Run `items`, committing each Result to `store` under `run_id` as it arrives.

    Marks the run "finished", or "interrupted" on Ctrl-C or SIGTERM, or when the executor stops
    (RunStopped); then it returns normally with `summary.interrupted` and `summary.signal` or
    `summary.stopped` set; everything done is kept and `--resume` does the rest.
    """
    summary = RunSummary(run_id=run_id, planned=len(items))
    executor = executor or get_executor(config)
    started = time.perf_counter()
    bar = _progress_bar(items, config, store) if progress and items and is_terminal(sys.stderr) else None

    def emit(result: Result) -> None:
        store.add_result(run_id, result)
        summary.add(result)
        if bar is not None:
            bar.advance(result.item, result.duration_s)

    status = "failed"
    try:
        if bar is not None:
            bar.__enter__()
        if items:
            executor.execute(items, config, emit)
        status = "finished"
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM as lifeline.Terminated
        from conformance.engine.lifeline import interrupt_signal

        summary.interrupted, summary.signal, status = True, interrupt_signal(interrupt), "interrupted"
    except RunStopped as stop:
        summary.interrupted, summary.stopped, status = True, str(stop), "interrupted"
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
        summary.wall_s = time.perf_counter() - started
        store.finish_run(run_id, status)
    return summary


def run_metadata(config: RunConfig, adapter: Any, command: str | None = None) -> dict[str, Any]:
    """What `Store.create_run` records about where and how a run happened."""
    import importlib.metadata
    import os
    import platform
    import shlex
    import subprocess

    versions = adapter.versions()
    try:
        transformers_version = importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        transformers_version = None
    try:
        git = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=os.getcwd())
        revision = git.stdout.strip() if git.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        revision = None
    return {
        "backend": config.backend, "device": config.device, "simulated": bool(adapter.simulated),
        "torch_version": versions.get("torch"), "backend_version": adapter.backend_version(),
        "transformers_version": transformers_version, "host": platform.node(), "git_revision": revision,
        "command": command if command is not None else shlex.join(["neuron-check", *sys.argv[1:]]),
        "versions": versions,
    }


def start_run(store: Any, config: RunConfig, adapter: Any, options: dict[str, Any], command: str | None = None) -> int:
    """Create the run row: metadata plus the options that rebuild its plan on --resume."""
    meta = run_metadata(config, adapter, command)
    return store.create_run(options=options, **meta)


def _progress_bar(items: Sequence[WorkItem], config: RunConfig, store: Any) -> Progress:
    """The run's bar, its estimate starting from the store's times of the same items on this backend."""
    expected = store.item_durations(config.backend, {item.suite for item in items})
    return Progress("items", len(items), Estimate(items, expected, workers=config.jobs))


class InlineExecutor(Executor):
    """Runs items in this process, one after another: no isolation from crashes or hangs.
    For debugging a suite and for tests that do not exercise isolation."""

    def execute(self, items: Sequence[WorkItem], config: RunConfig, emit: Callable[[Result], None]) -> None:
        from conformance.engine.worker import init_worker, run_one

        ctx = init_worker(config)
        for item in items:
            emit(run_one(item, ctx))


# -- the local process pool -----------------------------------------------------


# Workers spawned by `prestart_workers`, waiting for a configuration; LocalExecutor takes them.
_PRESTARTED: list["_Worker"] = []


def prestart_workers(jobs: int, suites: tuple[str, ...], executor: str = "local") -> None:
    """Start the local pool's start-up now, before the caller plans the run and opens the store:
    importing torch and the suites' databases takes seconds, and that overlaps the parent's own
    start-up instead of following it. Where workers fork from a preloading server
    (preforked.py), that server is started, and the run forks its workers from it once it has
    imported; elsewhere the workers themselves are spawned now. Unused ones die with us."""
    if executor != "local":
        return
    from conformance.engine import preforked

    if preforked.available():
        preforked.context(suites)
        return
    mp = multiprocessing.get_context("spawn")
    while len(_PRESTARTED) < jobs:
        _PRESTARTED.append(_Worker(mp, None, suites))


class _Worker:
    """Parent-side handle of one worker process (`config` None: prestarted, not yet told what to run)."""

    def __init__(self, mp: Any, config: RunConfig | None, suites: tuple[str, ...]):
        from conformance.engine.worker import worker_main

        self.conn, child = mp.Pipe()
        self.process = mp.Process(target=worker_main, args=(child, config, suites, dict(os.environ)), daemon=True)
        self.process.start()
        child.close()
        self.ready = False
        self.batch: collections.deque[tuple[int, WorkItem]] = collections.deque()
        self.current: int | None = None
        self.started_at = 0.0
        self.harness_s = 0.0  # the current item's harness work so far, which its time limit does not count
        self.spawned_at = time.monotonic()

    @classmethod
    def get(cls, mp: Any, config: RunConfig, suites: tuple[str, ...]) -> "_Worker":
        """A prestarted worker given this run's configuration, else a freshly spawned one."""
        while _PRESTARTED:
            worker = _PRESTARTED.pop()
            try:
                if worker.process.is_alive():
                    worker.conn.send(("init", config, suites))
                    worker.spawned_at = time.monotonic()  # the start deadline counts from here
                    return worker
            except OSError:
                pass
            worker.kill()
        return cls(mp, config, suites)

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()


class LocalExecutor(Executor):
    """`config.jobs` worker processes, each initialising the backend and suites once."""

    def execute(self, items: Sequence[WorkItem], config: RunConfig, emit: Callable[[Result], None]) -> None:
        from conformance.engine import preforked

        suites = tuple(sorted({item.suite for item in items}))
        mp = preforked.context(suites)
        pending = collections.deque(enumerate(items))
        jobs = max(1, min(config.jobs, len(items)))
        workers = [_Worker.get(mp, config, suites) for _ in range(jobs)]
        start_failures = 0
        remaining = len(items)
        try:
            while remaining:
                for worker in workers:
                    # The next batch goes out while the last item of the current one runs, so a
                    # worker never idles while we store its results.
                    if worker.ready and len(worker.batch) <= 1 and pending:
                        size = max(1, min(MAX_BATCH, len(pending) // (jobs * 4)))
                        batch = [pending.popleft() for _ in range(min(size, len(pending)))]
                        worker.batch.extend(batch)
                        worker.conn.send(("batch", batch))
                multiprocessing.connection.wait(
                    [w.conn for w in workers] + [w.process.sentinel for w in workers], timeout=POLL_S
                )
                for position, worker in enumerate(workers):
                    if not worker.ready and time.monotonic() - worker.spawned_at > START_TIMEOUT_S:
                        raise EngineError(f"a worker did not start the backend within {START_TIMEOUT_S:g} s.")
                    dead, emitted = self._drain(worker, items, emit)
                    remaining -= emitted
                    if worker.ready and emitted:
                        start_failures = 0
                    lost = self._lost_item(worker, items, config, dead)
                    if lost is None and not dead:
                        continue
                    if lost is not None:
                        emit(lost)
                        remaining -= 1
                    if not worker.ready:
                        start_failures += 1
                        if start_failures >= MAX_START_FAILURES:
                            raise EngineError(f"worker processes die while starting ({signal_name(worker.process.exitcode)}).")
                    pending.extendleft(reversed(worker.batch))  # the unstarted rest of its batch
                    worker.kill()
                    workers[position] = _Worker(mp, config, suites)
            for worker in workers:
                worker.conn.send(("stop",))
        finally:
            for worker in workers:
                worker.kill()

    @staticmethod
    def _drain(worker: _Worker, items: Sequence[WorkItem], emit: Callable[[Result], None]) -> tuple[bool, int]:
        """Read everything the worker sent; (is it dead, how many results were emitted)."""
        emitted = 0
        try:
            while worker.conn.poll():
                message = worker.conn.recv()
                kind = message[0]
                if kind == "ready":
                    worker.ready = True
                elif kind == "init-error":
                    raise EngineError(f"the worker could not start the backend: {message[1]}")
                elif kind == "start":
                    worker.current, worker.started_at, worker.harness_s = message[1], time.monotonic(), 0.0
                elif kind == "harness-time":
                    worker.harness_s = message[1]
                elif kind == "result":
                    worker.batch.popleft()
                    worker.current = None
                    emit(message[2])
                    emitted += 1
        except (EOFError, OSError):
            return True, emitted
        return worker.process.exitcode is not None, emitted

    @staticmethod
    def _lost_item(worker: _Worker, items: Sequence[WorkItem], config: RunConfig, dead: bool) -> Result | None:
        """CRASH for the item a dead worker was running, TIMEOUT (after killing it) for a hung one."""
        if worker.current is None:
            return None
        elapsed = time.monotonic() - worker.started_at
        if dead:
            worker.process.join(5)
            status = Status.CRASH
            message = f"the worker process died ({signal_name(worker.process.exitcode)}) while running this item."
        elif elapsed - worker.harness_s > config.timeout_s:
            worker.process.kill()
            worker.process.join(5)
            status = Status.TIMEOUT
            counted = "" if not worker.harness_s else (
                f" ({elapsed:.0f} s in all, of which {worker.harness_s:.0f} s were the harness's own CPU reference and "
                "comparisons, which the limit does not count)")
            message = f"the item ran longer than the {config.timeout_s:g} s limit{counted}; its worker was killed."
        else:
            return None
        item = items[worker.current]
        worker.batch.popleft()
        worker.current = None
        return Result.for_item(item, status, message=message, duration_s=elapsed)
