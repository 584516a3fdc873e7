"""Runtime half of the porting check: run the user's script in a child process and read back
what it did on the target device.

The child (porting_cli/trace_child.py) appends JSON lines to a records file as it learns
things, so whatever happens to it (a crash, `os._exit`, an endless loop killed at
`--max-seconds`) the parent keeps a partial op table. Record kinds:

    start         device, backend, simulated, versions
    op            first use of (op, dtypes, user site)
    counts        snapshot of every (op, dtypes, site) count (each optimizer step, each second, end)
    op_error      an op that raised on the target: op, dtypes, site, status, message
    remap         first remap at (site, what); remap_counts has the totals at the end
    step          optimizer step n finished
    fallbacks     ops that ran through the backend's CPU fallback
    note          something the reader should know (e.g. autocast disabled)
    end           outcome (finished | stopped-steps | stopped-time | exit | raised), seconds, ...
    divergence    CPU vs target outputs of get_model_and_inputs()
    setup_error   the device could not be used (becomes an InputError here)

The time limit is enforced twice: the child stops the script with SIGALRM at `max_seconds`
(clean, full records), and the parent kills the child's process group GRACE_S later.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

from op_db.errors import InputError

GRACE_S = 10.0  # after max_seconds, how long the child may take to stop by itself
SETUP_LIMIT_S = 300.0  # importing torch and initialising the backend, before the script starts
OUTPUT_TAIL_LINES = 20


@dataclasses.dataclass
class OpUse:
    op: str
    dtypes: tuple[str, ...]
    site: str | None
    count: int


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
              max_seconds: float | None, divergence: bool = True) -> TraceResult:
    """Run `script` (with `args`) in a child process on `device`; never raises for the script's sake.

    Raises InputError only when the device itself cannot be used.
    """
    with tempfile.TemporaryDirectory(prefix="neuron-check-trace-") as tmp:
        records = os.path.join(tmp, "records.jsonl")
        config = os.path.join(tmp, "config.json")
        output = os.path.join(tmp, "output.log")
        with open(config, "w", encoding="utf-8") as handle:
            json.dump({"script": script, "args": args, "device": device, "records": records,
                       "max_steps": max_steps, "max_seconds": max_seconds, "divergence": divergence}, handle)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if device and not device.startswith("sim"):
            env.pop("NEURON_CHECK_SIM_PROFILE", None)  # a sim profile means nothing elsewhere
        with open(output, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "porting_cli.trace_child", config],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True)
            killed = _wait(proc, records, max_seconds)
        result = read_records(records, script)
        result.returncode = proc.returncode
        result.output_tail = _tail(output)
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
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
            proc.wait()
            return True


def _has_started(records: str) -> bool:
    try:
        with open(records, encoding="utf-8") as handle:
            return '"kind": "start"' in handle.readline()
    except OSError:
        return False


def _tail(path: str) -> list[str]:
    try:
        with open(path, "rb") as handle:
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return lines[-OUTPUT_TAIL_LINES:]


def read_records(path: str, script: str) -> TraceResult:
    """Fold the records file into a TraceResult (a truncated last line is ignored)."""
    result = TraceResult(script=script)
    counts: Counter[tuple[str, tuple[str, ...], str | None]] = Counter()
    remaps: dict[tuple[str | None, str], int] = {}
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
        if kind == "start":
            result.outcome = "running"
            for key in ("device", "backend", "simulated", "versions"):
                setattr(result, key, record[key])
        elif kind == "op":
            key = (record["op"], tuple(record["dtypes"]), record["site"])
            counts[key] = max(counts[key], 1)
        elif kind == "counts":
            for op, dtypes, site, n in record["uses"]:
                key = (op, tuple(dtypes), site)
                counts[key] = max(counts[key], n)
        elif kind == "op_error":
            result.errors.append(record)
        elif kind == "remap":
            remaps.setdefault((record["site"], record["what"]), 1)
        elif kind == "remap_counts":
            remaps.update({(site, what): n for site, what, n in record["remaps"]})
        elif kind == "step":
            result.steps = max(result.steps, record["n"])
        elif kind == "fallbacks":
            result.fallbacks = dict(record["ops"])
        elif kind == "note":
            result.notes.append(record["text"])
        elif kind == "end":
            result.outcome = record["outcome"]
            result.seconds = record.get("seconds")
            result.exit_code = record.get("exit_code")
            result.exit_message = record.get("exit_message")
            result.exception = record.get("exception")
        elif kind == "divergence":
            result.divergence = record
    result.uses = [OpUse(op, dtypes, site, n) for (op, dtypes, site), n in counts.items()]
    result.remapped = [{"site": site, "what": what, "count": n} for (site, what), n in remaps.items()]
    return result


class Prediction:
    """Predicted status of an op on the target, from a stored run or a sim profile (--against)."""

    def __init__(self, source: str, unsupported: Any, fallback: Any, supported: set[str] | None):
        self.source = source
        self._unsupported, self._fallback, self._supported = unsupported, fallback, supported

    def status_of(self, op: str) -> str:
        if self._unsupported(op):
            return "UNSUPPORTED"
        if self._fallback(op):
            return "FALLBACK"
        if self._supported is None or op in self._supported:
            return "ran"
        return "untested"

    @classmethod
    def load(cls, spec: str, db_path: str | None) -> "Prediction":
        if spec.endswith(".json") or os.path.isfile(spec):
            return cls._from_profile(spec)
        return cls._from_run(spec, db_path)

    @classmethod
    def _from_profile(cls, path: str) -> "Prediction":
        if not os.path.isfile(path):
            raise InputError(f"--against {path}: no such profile file.")
        from op_db.sim_profile import load_profile

        profile = load_profile(path)
        # A profile lists what is missing; every other op is taken as supported.
        return cls(f"profile {os.path.basename(path)} ({profile.name})", profile.is_unsupported_op,
                   profile.is_fallback_op, None)

    @classmethod
    def _from_run(cls, spec: str, db_path: str | None) -> "Prediction":
        from op_db.records import WORKING, Status
        from op_db.store import open_for_reading

        with open_for_reading(db_path) as store:
            run_id = store.resolve_run(spec)
            results = store.results(run_id)
        unsupported = {r.failing_op for r in results if r.status == Status.UNSUPPORTED and r.failing_op}
        fallback = {op for r in results for op in r.fallback_ops}
        supported = {op for r in results if r.status in WORKING for op in r.aten_ops}
        return cls(f"run {run_id}", unsupported.__contains__, fallback.__contains__, supported)
