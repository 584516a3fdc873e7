"""Runtime half of the porting check: run the user's script in a child process and read back
what it did on the target device.

The child (porting_cli/runtime/trace_child.py) appends JSON lines to a records file as it learns
things, so whatever happens to it (a crash, `os._exit`, an endless loop killed at
`--max-seconds`) the parent keeps a partial op table. Record kinds:

    start         device, backend, simulated, versions
    clock         set-up done: the script starts now (--max-seconds counts from here)
    op            first use of (op, dtypes, user site)
    counts        snapshot of every (op, dtypes, site) count (each optimizer step, each second, end)
    op_error      an op that raised on the target: op, dtypes, site, status, message
                  (status TIMEOUT: the time limit stopped the script inside the op)
    op_running    an op that has not returned after a second (op_done when it does): one still
                  running when the script is stopped at the time limit is a TIMEOUT op
    remap         first remap at (site, what); remap_counts has the totals at the end
    step          optimizer step n finished
    fallbacks     ops that ran through the backend's CPU fallback
    note          something the reader should know (e.g. autocast disabled)
    end           outcome (finished | stopped-steps | stopped-time | exit | raised), seconds, ...
    divergence    CPU vs target outputs of get_model_and_inputs()
    setup_error   the device could not be used (becomes an InputError here)
    process, rank a child process's records file (proc-PID.jsonl): who it is, its rank
    exception     a child process's exception, with its own user line

A child's outcome: finished, stopped-steps (it exits 0 at --max-steps), raised, terminated
(SIGTERM: the root ending its tree, or mp.spawn ending a failed rank's siblings), or killed /
ended (no end record: SIGKILL, or os._exit).

Each child process of the script (mp.spawn ranks, mp.Process, torchrun-style workers) writes its
own proc-PID.jsonl beside the root's records file; its ops are labelled "rank N" (or "pid N").
At the end, and at the time limit, every process of the script's tree is killed: the session's
process group and every process carrying the trace's token (porting_cli/runtime/trace_tree.py).

The time limit is enforced twice: the child stops the script with SIGALRM at `max_seconds`
(clean, full records), and the parent kills the child's process group GRACE_S later.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from typing import Any

from op_db.errors import InputError
from porting_cli.runtime.prediction import Prediction  # noqa: F401 - re-exported: callers import it from here

GRACE_S = 10.0  # after max_seconds, how long the child may take to stop by itself
SETUP_LIMIT_S = 300.0  # importing torch and initialising the backend, before the script starts
OUTPUT_TAIL_LINES = 20


@dataclasses.dataclass
class OpUse:
    op: str
    dtypes: tuple[str, ...]
    site: str | None
    count: int
    process: str = "main"  # "main" (the script's own process), "rank N", or "pid N"


@dataclasses.dataclass
class TraceResult:
    """Everything the child reported, plus how it ended."""

    script: str
    device: str | None = None
    backend: str | None = None
    simulated: bool = False
    versions: dict[str, str] = dataclasses.field(default_factory=dict)
    outcome: str = "not-started"
    seconds: float | None = None
    steps: int = 0
    exit_code: int | None = None
    exit_message: str | None = None
    exception: dict[str, Any] | None = None
    uses: list[OpUse] = dataclasses.field(default_factory=list)
    errors: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    fallbacks: dict[str, int] = dataclasses.field(default_factory=dict)
    remapped: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    divergence: dict[str, Any] | None = None
    output_tail: list[str] = dataclasses.field(default_factory=list)
    returncode: int | None = None
    processes: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # child processes

    @property
    def complete(self) -> bool:
        """True when the script ran to its end or to a limit we set."""
        return self.outcome in ("finished", "stopped-steps", "stopped-time", "exit") and self.exit_code in (None, 0)

    def describe_outcome(self, max_steps: int, max_seconds: float | None) -> str:
        return {
            "finished": "the script finished",
            "stopped-steps": f"stopped after {self.steps} optimizer step(s) (--max-steps {max_steps})",
            "stopped-time": f"stopped after {max_seconds:g} s (--max-seconds); the report is partial"
            if max_seconds else "stopped at the time limit; the report is partial",
            "exit": f"the script called sys.exit({self.exit_code if self.exit_message is None else repr(self.exit_message)})",
            "raised": "the script raised an exception",
            "crashed": f"the script's process died ({self._signal()}); the report is partial",
            "not-started": "the script did not start",
        }.get(self.outcome, self.outcome)

    def _signal(self) -> str:
        from conformance.outcome import signal_name

        return signal_name(self.returncode)


def run_trace(script: str, args: list[str], *, device: str | None, max_steps: int,
              max_seconds: float | None, divergence: bool = True, root: str | None = None,
              display_base: str | None = None) -> TraceResult:
    """Run `script` (with `args`) in a child process on `device`; never raises for the script's sake.

    `root`: the project whose files are the user's code (default: the script's folder);
    `display_base`: sites are shown relative to it (default: the working directory).
    Raises InputError only when the device itself cannot be used.
    """
    from porting_cli.runtime.trace_tree import TRACE_TOKEN_ENV, kill_tagged

    token = uuid.uuid4().hex
    with tempfile.TemporaryDirectory(prefix="neuron-check-trace-") as tmp:
        records = os.path.join(tmp, "records.jsonl")
        config = os.path.join(tmp, "config.json")
        output = os.path.join(tmp, "output.log")
        with open(config, "w", encoding="utf-8") as handle:
            json.dump({"script": script, "args": args, "device": device, "records": records,
                       "max_steps": max_steps, "max_seconds": max_seconds, "divergence": divergence,
                       "root": root, "display_base": display_base}, handle)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env[TRACE_TOKEN_ENV] = token
        if device and not device.startswith("sim"):
            env.pop("NEURON_CHECK_SIM_PROFILE", None)  # a sim profile means nothing elsewhere
        with open(output, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "porting_cli.runtime.trace_child", config],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True)
            try:
                killed = _wait(proc, records, max_seconds)
            finally:
                left = _end_tree(proc, token, kill_tagged)
        root_records = fold_records(records)
        result = result_of(root_records, script)
        result.returncode = proc.returncode
        result.output_tail = _tail(output)
        merge_processes(result, root_records, tmp, killed)
    if left:
        result.notes.append(f"{left} process(es) of the script outlived it and were killed")
    if killed and result.outcome in ("not-started", "running"):
        result.outcome = "stopped-time"
    elif result.outcome == "running":
        # No end record: the process died (signal) or the script called os._exit(n).
        if proc.returncode is not None and proc.returncode < 0:
            result.outcome = "crashed"
        else:
            result.outcome, result.exit_code = "exit", proc.returncode
            result.notes.append("the process ended without returning to Python (os._exit?)")
    return result


def _end_tree(proc: subprocess.Popen, token: str, kill_tagged: Any) -> int:
    """Kill what is left of the script's process tree: its session, then every process that
    carries the trace's token (a grandchild that left the session included)."""
    if proc.poll() is None:
        _kill_group(proc)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the session's other members (the leader is gone)
    return kill_tagged(token)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _wait(proc: subprocess.Popen, records: str, max_seconds: float | None) -> bool:
    """Wait for the child; kill its process group at the deadline. True when we killed it."""
    started_at: float | None = None
    setup_deadline = time.monotonic() + SETUP_LIMIT_S
    while True:
        try:
            proc.wait(timeout=0.2)
            return False
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if started_at is None and _has_started(records):  # the child's clock starts a little later
            started_at = now
        if started_at is None:
            deadline = setup_deadline
        else:
            deadline = started_at + max_seconds + GRACE_S if max_seconds else float("inf")
        if now > deadline:
            _kill_group(proc)
            return True


def _has_started(records: str) -> bool:
    """Whether the script's clock has started (the `clock` record follows the set-up)."""
    try:
        with open(records, encoding="utf-8") as handle:
            return '"kind": "clock"' in handle.read()
    except OSError:
        return False


def _tail(path: str) -> list[str]:
    try:
        with open(path, "rb") as handle:
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return lines[-OUTPUT_TAIL_LINES:]


@dataclasses.dataclass
class ProcessRecords:
    """The records file of one process of the trace, folded."""

    counts: Counter = dataclasses.field(default_factory=Counter)  # (op, dtypes, site) -> n
    errors: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    remaps: dict[tuple[str | None, str], int] = dataclasses.field(default_factory=dict)
    running: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)  # slow ops not returned
    fallbacks: dict[str, int] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    steps: int = 0
    start: dict[str, Any] | None = None
    process: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    divergence: dict[str, Any] | None = None
    rank: int | None = None
    exception: dict[str, Any] | None = None  # a child process's own exception, with its user line

    def timed_out_ops(self) -> list[dict[str, Any]]:
        """Ops still running when the process was stopped at the time limit: TIMEOUT errors."""
        from porting_cli.runtime.trace_record import TIMEOUT_MESSAGE

        known = {(e["op"], e["site"]) for e in self.errors if e["status"] == "TIMEOUT"}
        return [{"op": r["op"], "dtypes": r["dtypes"], "site": r["site"], "status": "TIMEOUT",
                 "message": TIMEOUT_MESSAGE} for r in self.running.values() if (r["op"], r["site"]) not in known]


def fold_records(path: str) -> ProcessRecords:
    """Read one records file (a truncated last line is ignored)."""
    folded = ProcessRecords()
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind = record.pop("kind", None)
        if kind == "setup_error":
            raise InputError(record["message"])
        if kind == "op":
            key = (record["op"], tuple(record["dtypes"]), record["site"])
            folded.counts[key] = max(folded.counts[key], 1)
        elif kind == "counts":
            for op, dtypes, site, n in record["uses"]:
                key = (op, tuple(dtypes), site)
                folded.counts[key] = max(folded.counts[key], n)
        elif kind == "op_error":
            folded.errors.append(record)
        elif kind == "op_running":
            folded.running[record["id"]] = record
        elif kind == "op_done":
            folded.running.pop(record["id"], None)
        elif kind == "remap":
            folded.remaps.setdefault((record["site"], record["what"]), 1)
        elif kind == "remap_counts":
            folded.remaps.update({(site, what): n for site, what, n in record["remaps"]})
        elif kind == "step":
            folded.steps = max(folded.steps, record["n"])
        elif kind == "fallbacks":
            folded.fallbacks = dict(record["ops"])
        elif kind == "note":
            folded.notes.append(record["text"])
        elif kind == "rank":
            folded.rank = record["rank"]
        elif kind in ("start", "process", "end", "divergence", "exception"):
            setattr(folded, kind, record)
    return folded


def read_records(path: str, script: str) -> TraceResult:
    """The root process's records as a TraceResult (descendants: merge_processes)."""
    return result_of(fold_records(path), script)


def result_of(root: ProcessRecords, script: str) -> TraceResult:
    result = TraceResult(script=script)
    if root.start is not None:
        result.outcome = "running"
        for key in ("device", "backend", "simulated", "versions"):
            setattr(result, key, root.start[key])
    if root.end is not None:
        result.outcome = root.end["outcome"]
        for key in ("seconds", "exit_code", "exit_message", "exception"):
            setattr(result, key, root.end.get(key))
    result.steps, result.fallbacks, result.notes = root.steps, dict(root.fallbacks), list(root.notes)
    result.divergence = root.divergence
    result.errors = list(root.errors)
    _add_uses(result, root, "main")
    result.remapped = [{"site": site, "what": what, "count": n} for (site, what), n in root.remaps.items()]
    return result


def merge_processes(result: TraceResult, root: ProcessRecords, folder: str, killed: bool) -> None:
    """Add the TIMEOUT ops and the records of the script's child processes (proc-PID.jsonl)."""
    stopped_by_time = killed or result.outcome == "stopped-time"
    if stopped_by_time:
        result.errors += root.timed_out_ops()
    remaps: Counter[tuple[str | None, str]] = Counter({(r["site"], r["what"]): r["count"] for r in result.remapped})
    for name in sorted(os.listdir(folder)):
        if not (name.startswith("proc-") and name.endswith(".jsonl")):
            continue
        child = fold_records(os.path.join(folder, name))
        info = dict(child.process or {})
        outcome = (child.end or {}).get("outcome", "killed" if stopped_by_time else "ended")
        if child.exception is not None and outcome == "finished":
            outcome = "raised"
        label = f"rank {child.rank}" if child.rank is not None else f"pid {info.get('pid', name[5:-6])}"
        _add_uses(result, child, label)
        result.errors += [dict(e, process=label) for e in child.errors]
        if stopped_by_time:
            result.errors += [dict(e, process=label) for e in child.timed_out_ops()]
        remaps.update(child.remaps)
        for op, n in child.fallbacks.items():
            result.fallbacks[op] = result.fallbacks.get(op, 0) + n
        result.notes += [n for n in child.notes if n not in result.notes]
        result.steps = max(result.steps, child.steps)
        if child.exception is not None and result.outcome == "raised" and "process" not in (result.exception or {}):
            # The root only re-raised it (mp.spawn): blame the child's own user line.
            via = result.exception or {}
            result.exception = dict(child.exception, process=label,
                                    via=f"{via.get('type')} at {via.get('site')}" if via else None)
        if outcome == "stopped-steps" and result.outcome == "finished":
            result.outcome = "stopped-steps"  # the ranks stopped at --max-steps; the root then ended
        result.processes.append({"process": label, "pid": info.get("pid"), "how": info.get("how"),
                                 "rank": child.rank, "outcome": outcome, "steps": child.steps,
                                 "ops": sum(child.counts.values())})
    result.remapped = [{"site": site, "what": what, "count": n} for (site, what), n in remaps.items()]


def _add_uses(result: TraceResult, folded: ProcessRecords, process: str) -> None:
    result.uses += [OpUse(op, dtypes, site, n, process) for (op, dtypes, site), n in folded.counts.items()]
