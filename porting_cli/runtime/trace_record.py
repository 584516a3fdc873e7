"""What every traced process records: the JSON-lines writer, the op recorder, the slow-op watch.

Used by the trace's root process (porting_cli/runtime/trace_child.py) and by each of its descendant
Python processes (porting_cli/runtime/trace_rank.py). Each process appends to its own records file,
flushed line by line, so a process killed at any moment leaves what it learned behind.

An op that has not returned after SLOW_OP_S is written as `op_running` (and `op_done` if it
returns after all): when the process is stopped at --max-seconds while an op is still running,
the parent turns it into a TIMEOUT op. An op interrupted by the time limit in Python (the
SIGALRM stop) is written as a TIMEOUT `op_error` at once.
"""

from __future__ import annotations

import json
import os
import threading
import time
import traceback
from collections import Counter
from typing import Any, Callable

from op_db.text import cut

SNAPSHOT_EVERY_S = 1.0
TRACEBACK_LINES = 8
SLOW_OP_S = 1.0
WATCH_EVERY_S = 0.25
TIMEOUT_MESSAGE = "the op did not return before the time limit (--max-seconds)"


class StopScript(BaseException):
    """Raised into the script to stop it at a limit; BaseException so `except Exception` misses it."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class RecordWriter:
    """Appends JSON lines to a records file, flushed at once (the process may be killed)."""

    def __init__(self, path: str):
        self._lock = threading.Lock()
        self._file = open(path, "a", encoding="utf-8")

    def reopen(self, path: str) -> None:
        """After a fork: the child writes its own file (the inherited lock may be held)."""
        self._lock = threading.Lock()
        self._file = open(path, "a", encoding="utf-8")

    def __call__(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"kind": kind, **fields}, default=str) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()


def one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return cut(text, limit)


def describe_exception(exc: BaseException, frames: Any) -> dict[str, Any]:
    user_lines = [
        f"{frames.format(fs.filename, fs.lineno)} in {fs.name}: {(fs.line or '').strip()}"
        for fs in traceback.extract_tb(exc.__traceback__)
        if frames.is_user(fs.filename)
    ]
    return {
        "type": type(exc).__name__,
        "message": one_line(exc, 1000),
        "site": frames.traceback_site(exc.__traceback__),
        "user_traceback": user_lines[-TRACEBACK_LINES:],
    }


def classify(exc: BaseException) -> str:
    """UNSUPPORTED or ERROR for the exception an op raised on the target (the shared rule)."""
    from conformance.outcome import classify_exception

    return str(classify_exception(exc))


def dtypes_of(args: Any, kwargs: Any) -> list[str]:
    import torch
    from torch.utils import _pytree as pytree

    found = {str(leaf.dtype).removeprefix("torch.") for leaf in pytree.tree_leaves((args, kwargs))
             if isinstance(leaf, torch.Tensor)}
    if not found and isinstance(kwargs.get("dtype"), torch.dtype):
        found.add(str(kwargs["dtype"]).removeprefix("torch."))
    return sorted(found)


def make_recorder(device_type: str, frames: Any, write: RecordWriter):
    """A TorchDispatchMode that counts every aten op touching the target by (op, dtypes, user
    site), records the ops that raise, and keeps the op each thread is running now."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from conformance.reference.oprecord import op_name, touches_device

    class TraceRecorder(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.uses: Counter[tuple[str, tuple[str, ...], str | None]] = Counter()
            self.failing_op: str | None = None
            self.inflight: dict[int, dict[str, Any]] = {}
            self._last_snapshot = time.monotonic()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            on_device = touches_device(args, kwargs, None, device_type)
            if not on_device:
                out = func(*args, **kwargs)
                if touches_device((), {}, out, device_type):
                    self._count(op_name(func), args, kwargs, frames.site())
                return out
            name, site, thread = op_name(func), frames.site(), threading.get_ident()
            running = {"op": name, "site": site, "since": time.monotonic(), "args": (args, kwargs), "slow": False}
            self.inflight[thread] = running
            try:
                out = func(*args, **kwargs)
            except StopScript as stop:
                if stop.reason == "time":
                    running["slow"] = False  # reported here, as a TIMEOUT error
                    write("op_error", op=name, dtypes=dtypes_of(args, kwargs), site=site,
                          status="TIMEOUT", message=TIMEOUT_MESSAGE)
                raise
            except Exception as exc:
                self.failing_op = self.failing_op or name
                write("op_error", op=name, dtypes=dtypes_of(args, kwargs), site=site,
                      status=classify(exc), message=one_line(exc))
                raise
            finally:
                self.inflight.pop(thread, None)
                if running["slow"]:
                    write("op_done", id=id(running))
            self._count(name, args, kwargs, site)
            return out

        def _count(self, name: str, args: Any, kwargs: Any, site: str | None) -> None:
            key = (name, tuple(dtypes_of(args, kwargs)), site)
            self.uses[key] += 1
            if self.uses[key] == 1:
                write("op", op=key[0], dtypes=list(key[1]), site=key[2])
            if time.monotonic() - self._last_snapshot > SNAPSHOT_EVERY_S:
                self.snapshot()

        def snapshot(self) -> None:
            self._last_snapshot = time.monotonic()
            write("counts", uses=[[op, list(dt), site, n] for (op, dt, site), n in list(self.uses.items())])

        def reset_after_fork(self) -> None:
            self.uses.clear()
            self.inflight.clear()

    return TraceRecorder()


def watch_slow_ops(recorder: Any, write: RecordWriter, stop: threading.Event | None = None) -> threading.Thread:
    """A daemon thread that writes `op_running` for each op running longer than SLOW_OP_S."""
    stop = stop or threading.Event()

    def watch() -> None:
        while not stop.wait(WATCH_EVERY_S):
            now = time.monotonic()
            for running in list(recorder.inflight.values()):
                if not running["slow"] and now - running["since"] > SLOW_OP_S:
                    running["slow"] = True
                    args, kwargs = running["args"]
                    write("op_running", id=id(running), op=running["op"], site=running["site"],
                          dtypes=dtypes_of(args, kwargs))

    thread = threading.Thread(target=watch, name="neuron-check-slow-op-watch", daemon=True)
    thread.start()
    return thread


def install_step_limit(max_steps: int, on_step: Callable[[int], None],
                       stop: Callable[[], None] | None = None) -> Any:
    """Count optimizer steps through the global post-step hook; stop the script at the limit
    (`stop()` when given, else StopScript)."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    steps = {"n": 0}

    def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        steps["n"] += 1
        on_step(steps["n"])
        if max_steps and steps["n"] >= max_steps:
            if stop is not None:
                stop()
            raise StopScript("steps")

    return register_optimizer_step_post_hook(after_step), steps


def process_records_path(records: str, pid: int | None = None) -> str:
    """The records file of a descendant process: next to the root's, named by pid."""
    return os.path.join(os.path.dirname(records), f"proc-{pid or os.getpid()}.jsonl")
