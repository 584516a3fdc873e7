"""The zoo census: does each (model type, task) pair build tiny and run one fp32 forward on CPU?

Pairs are grouped by model type (a type's modeling module is imported once)
and run in spawned worker processes that exit after a batch: keeping every
modeling module imported costs gigabytes. Each worker reports every type as
it starts and every pair as it ends; a type that runs past `timeout_s` has
its worker killed, its unfinished pairs become TIMEOUT, and a fresh worker
takes the rest of the batch, so the census always completes.

Every pair that ran records the distinct aten overloads its forward
dispatched (the coverage the zoo exercises); every pair that did not says
why, one cause from `causes.py`.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import queue
import time
from collections.abc import Callable, Sequence

from conformance.engine.lifeline import die_with_parent

BATCH = 24
OK = "ok"
DEFAULT_TIMEOUT_S = 120.0


@dataclasses.dataclass
class PairStatus:
    subject: str
    model_type: str
    task: str
    ok: bool
    cause: str | None = None  # one of causes.CAUSES when not ok
    detail: str = ""
    seconds: float = 0.0
    ops: tuple[str, ...] = ()

    @property
    def status(self) -> str:
        if self.ok:
            return OK
        from conformance.models.causes import OPTIONAL_DEPENDENCY

        return f"{self.cause} {self.detail}" if self.cause == OPTIONAL_DEPENDENCY else f"{self.cause}: {self.detail}"


def _forward_ops(entry, model) -> tuple[str, ...]:
    import torch

    from conformance.models.inputs import make_inputs
    from conformance.reference.oprecord import record_ops

    inputs = make_inputs(entry.task, model.config, 0, model=model)
    with torch.no_grad(), record_ops("cpu") as recorder:
        model(**inputs)
    return tuple(sorted(recorder.ops))


def check_pair(entry) -> PairStatus:
    """Build `entry` tiny and run one forward on CPU; never raises."""
    from conformance.models import zoo
    from conformance.models.causes import classify

    start = time.perf_counter()
    stage = "config"
    try:
        config = zoo.build_config(entry)
        stage = "model"
        model = zoo.build_model(entry, config=config)
        stage = "forward"
        ops = _forward_ops(entry, model)
    except Exception as exc:  # noqa: BLE001 - the failure is this pair's status
        failure = classify(exc, stage)
        return PairStatus(entry.subject, entry.model_type, entry.task, False, failure.cause, failure.detail,
                          time.perf_counter() - start)
    return PairStatus(entry.subject, entry.model_type, entry.task, True, seconds=time.perf_counter() - start,
                      ops=ops)


def entries_of(library: str) -> dict:
    """subject -> zoo entry of `library` ("transformers" or "diffusers"); every entry has
    subject, model_type and task (a Diffusers class's task is its family)."""
    if library == "diffusers":
        from conformance.models.diffusers.zoo import catalogue

        return catalogue()
    from conformance.models import zoo

    return zoo.pairs()


def _worker(subjects: Sequence[str], out, checker: Callable = check_pair, library: str = "transformers",
            jobs: int = 1) -> None:
    import transformers

    from conformance.engine.worker import share_cores

    die_with_parent()  # a worker stuck in a model's forward must not outlive a killed census
    share_cores(jobs)
    transformers.logging.set_verbosity_error()
    if library == "diffusers":
        from conformance.models.diffusers.zoo import quiet

        quiet()
    entries = entries_of(library)
    for subject in subjects:
        out.put(("start", subject))
        out.put(("done", checker(entries[subject])))
    out.put(("exit", None))


@dataclasses.dataclass
class _Running:
    process: multiprocessing.Process
    todo: list[str]
    current: str | None = None
    since: float = 0.0


def census(subjects: Sequence[str], jobs: int = 1, batch: int = BATCH, timeout_s: float = DEFAULT_TIMEOUT_S,
           on_pair: Callable[[PairStatus], None] | None = None,
           checker: Callable | None = None, library: str = "transformers") -> dict[str, PairStatus]:
    """subject -> PairStatus for every subject (keys of `entries_of(library)`), in `jobs` worker
    processes; `checker` (a module-level function, entry -> PairStatus; the Diffusers zoo's is
    conformance.models.diffusers.census.check_class) checks one pair."""
    checker = checker or check_pair
    entries = entries_of(library)
    ordered = sorted(subjects, key=lambda s: (entries[s].model_type, s))
    batches = [ordered[i:i + batch] for i in range(0, len(ordered), batch)]
    mp = multiprocessing.get_context("spawn")
    results: queue.Queue = mp.Queue()
    found: dict[str, PairStatus] = {}
    running: dict[int, _Running] = {}

    def record(status: PairStatus) -> None:
        found[status.subject] = status
        if on_pair is not None:
            on_pair(status)

    def launch(todo: list[str]) -> None:
        process = mp.Process(target=_relay, args=(todo, results, checker, library, jobs), daemon=True)
        process.start()
        running[process.pid] = _Running(process, list(todo))

    pending = list(batches)
    while pending or running:
        while pending and len(running) < max(1, jobs):
            launch(pending.pop(0))
        try:
            pid, kind, payload = results.get(timeout=1.0)
        except queue.Empty:
            pid = kind = payload = None
        if kind == "start" and pid in running:
            running[pid].current, running[pid].since = payload, time.monotonic()
        elif kind == "done" and pid in running:
            record(payload)
            running[pid].todo.remove(payload.subject)
            running[pid].current = None
        elif kind == "exit" and pid in running:
            running.pop(pid).process.join()
        for pid, job in list(running.items()):
            overdue = job.current is not None and time.monotonic() - job.since > timeout_s
            died = not job.process.is_alive() and job.process.exitcode not in (0, None)
            if overdue or died:
                _stop(job, pid, running, found, record, timeout_s, overdue, pending, entries)
    return {s: found[s] for s in subjects if s in found}


def _stop(job: _Running, pid: int, running, found, record, timeout_s, overdue, pending, entries) -> None:
    """Kill an overdue (or dead) worker: its current pair is a TIMEOUT (or a crash, a model bug),
    the rest of its batch goes to a fresh worker."""
    from conformance.models.causes import MODEL_BUG, TIMEOUT

    if job.process.is_alive() and not overdue:
        return
    job.process.kill()
    job.process.join()
    running.pop(pid)
    subject = job.current or (job.todo[0] if job.todo else None)
    if subject is not None and subject not in found:
        entry = entries[subject]
        cause, detail = (TIMEOUT, f"no forward within {timeout_s:g} s") if overdue else \
            (MODEL_BUG, f"worker died (exit code {job.process.exitcode})")
        record(PairStatus(subject, entry.model_type, entry.task, False, cause, detail, timeout_s if overdue else 0.0))
    rest = [s for s in job.todo if s != subject and s not in found]
    if rest:
        pending.insert(0, rest)


def _relay(subjects: Sequence[str], results, checker: Callable, library: str, jobs: int) -> None:
    """Run the worker, tagging each message with this process id for the parent's one queue."""
    import os

    class _Tagged:
        def put(self, message):
            results.put((os.getpid(), *message))

    _worker(subjects, _Tagged(), checker, library, jobs)


def aten_coverage(statuses: dict[str, PairStatus]) -> tuple[set[str], dict[str, set[str]]]:
    """(every distinct aten overload the zoo's forwards dispatched, the same per task)."""
    total: set[str] = set()
    per_task: dict[str, set[str]] = {}
    for status in statuses.values():
        total.update(status.ops)
        per_task.setdefault(status.task, set()).update(status.ops)
    return total, per_task
