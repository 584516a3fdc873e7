"""The child process of the porting trace: runs the user's script on the target device.

`python -m porting_cli.trace_child CONFIG.json` (started by porting_cli/trace.py). The script
runs as `__main__` with `cuda` remapped to the target (porting_cli/remap.py) under a
TorchDispatchMode that records every aten overload touching the target, with its dtypes and
the user's source line. Everything learned is appended to the records file as JSON lines the
moment it is learned, so a script that crashes the process, calls `os._exit`, or is killed at
the time limit still leaves a partial record behind. Record kinds are listed in trace.py.

The script is executed the way `runpy.run_path(path, run_name="__main__")` does it (a fresh
`__main__` module, `sys.argv`, `sys.path[0]`), except that its globals are kept when it stops
early, so `get_model_and_inputs()` can still be called for the divergence check.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
import types
from collections import Counter
from typing import Any

SNAPSHOT_EVERY_S = 1.0
TRACEBACK_LINES = 8


class StopScript(BaseException):
    """Raised into the script to stop it at a limit; BaseException so `except Exception` misses it."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class RecordWriter:
    """Appends JSON lines to the records file, flushed at once (the parent may kill us)."""

    def __init__(self, path: str):
        self._file = open(path, "a", encoding="utf-8")

    def __call__(self, kind: str, **fields: Any) -> None:
        self._file.write(json.dumps({"kind": kind, **fields}, default=str) + "\n")
        self._file.flush()


def _dtypes(args: Any, kwargs: Any) -> list[str]:
    import torch
    from torch.utils import _pytree as pytree

    found = {str(leaf.dtype).removeprefix("torch.") for leaf in pytree.tree_leaves((args, kwargs))
             if isinstance(leaf, torch.Tensor)}
    if not found and isinstance(kwargs.get("dtype"), torch.dtype):
        found.add(str(kwargs["dtype"]).removeprefix("torch."))
    return sorted(found)


def make_recorder(device_type: str, frames: Any, write: RecordWriter, classify: Any):
    """An OpRecorder that also keys every op by (dtypes, user site) and records op errors."""
    from conformance.oprecord import OpRecorder, op_name, touches_device

    class TraceRecorder(OpRecorder):
        def __init__(self) -> None:
            super().__init__(device_type, on_op=self._seen)
            self.uses: Counter[tuple[str, tuple[str, ...], str | None]] = Counter()
            self._last_snapshot = time.monotonic()

        def _seen(self, name: str, args: Any, kwargs: Any) -> None:
            key = (name, tuple(_dtypes(args, kwargs)), frames.site())
            self.uses[key] += 1
            if self.uses[key] == 1:
                write("op", op=key[0], dtypes=list(key[1]), site=key[2])
            if time.monotonic() - self._last_snapshot > SNAPSHOT_EVERY_S:
                self.snapshot()

        def snapshot(self) -> None:
            self._last_snapshot = time.monotonic()
            write("counts", uses=[[op, list(dt), site, n] for (op, dt, site), n in self.uses.items()])

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            try:
                return super().__torch_dispatch__(func, types, args, kwargs)
            except Exception as exc:
                if touches_device(args, kwargs or {}, None, device_type):
                    write("op_error", op=op_name(func), dtypes=_dtypes(args, kwargs or {}),
                          site=frames.site(), status=classify(exc), message=_one_line(exc))
                raise

    return TraceRecorder()


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def classify(exc: BaseException) -> str:
    """UNSUPPORTED or ERROR for the exception an op raised on the target (the shared rule)."""
    from conformance.outcome import classify_exception

    return str(classify_exception(exc))


def install_step_limit(max_steps: int, on_step: Any) -> Any:
    """Count optimizer steps through the global post-step hook; stop the script at the limit."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    steps = {"n": 0}

    def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        steps["n"] += 1
        on_step(steps["n"])
        if max_steps and steps["n"] >= max_steps:
            raise StopScript("steps")

    return register_optimizer_step_post_hook(after_step), steps


def arm_time_limit(seconds: float | None) -> None:
    """SIGALRM stops a script that runs too long (the parent kills us if even that fails)."""
    if not seconds or not hasattr(signal, "setitimer"):
        return

    def on_alarm(signum: int, frame: Any) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        raise StopScript("time")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def run_script(path: str, argv: list[str]) -> tuple[dict[str, Any], BaseException | None]:
    """Execute the script as __main__; returns its globals and what stopped it (None: it finished)."""
    with open(path, "rb") as handle:
        code = compile(handle.read(), path, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=path, __cached__=None, __loader__=None, __package__=None,
                           __spec__=None, __builtins__=__builtins__)
    saved = sys.modules.get("__main__"), sys.argv[:], sys.path[0]
    sys.modules["__main__"] = module
    sys.argv[:] = [path, *argv]
    sys.path[0] = os.path.dirname(os.path.abspath(path))
    try:
        exec(code, module.__dict__)
        return module.__dict__, None
    except BaseException as exc:  # noqa: BLE001 - every way out of the script is a finding
        return module.__dict__, exc
    finally:
        sys.modules["__main__"], sys.argv[:] = saved[0], saved[1]


def describe_exception(exc: BaseException, frames: Any) -> dict[str, Any]:
    user_lines = [
        f"{frames.format(fs.filename, fs.lineno)} in {fs.name}: {(fs.line or '').strip()}"
        for fs in traceback.extract_tb(exc.__traceback__)
        if frames.is_user(fs.filename)
    ]
    return {
        "type": type(exc).__name__,
        "message": _one_line(exc, 1000),
        "site": frames.traceback_site(exc.__traceback__),
        "user_traceback": user_lines[-TRACEBACK_LINES:],
    }


def outcome_of(stopped: BaseException | None, frames: Any) -> dict[str, Any]:
    if stopped is None:
        return {"outcome": "finished"}
    if isinstance(stopped, StopScript):
        return {"outcome": f"stopped-{stopped.reason}"}
    if isinstance(stopped, SystemExit):
        code = stopped.code
        return {"outcome": "exit", "exit_code": code if isinstance(code, int) else (0 if code is None else 1),
                "exit_message": None if code is None or isinstance(code, int) else str(code)}
    return {"outcome": "raised", "exception": describe_exception(stopped, frames)}


def main(config_path: str) -> int:
    with open(config_path, encoding="utf-8") as handle:
        config = json.load(handle)
    write = RecordWriter(config["records"])
    try:
        from porting_cli.options import resolve_device

        adapter, target = resolve_device(config.get("device"))
    except Exception as exc:  # noqa: BLE001 - InputError and the like, told to the parent as one sentence
        write("setup_error", message=str(exc).rstrip(".") + ".")
        return 2
    import torch

    from porting_cli.remap import RemapLog, UserFrames, remap_cuda

    script = os.path.abspath(config["script"])
    frames = UserFrames(script)
    device_type = torch.device(target).type
    write("start", device=target, backend=adapter.name, simulated=adapter.simulated,
          versions=adapter.versions(), pid=os.getpid())
    recorder = make_recorder(device_type, frames, write, classify)
    log = RemapLog(frames, on_new=lambda site, what: write("remap", site=site, what=what))

    def on_step(n: int) -> None:
        write("step", n=n)
        recorder.snapshot()

    hook, _ = install_step_limit(int(config.get("max_steps") or 0), on_step)
    stopped: BaseException | None = None
    script_globals: dict[str, Any] = {}
    try:
        with adapter.track_fallbacks() as fallbacks, remap_cuda(target, log, adapter) as notes:
            started = time.monotonic()  # the budget is the script's: set-up above is not counted
            arm_time_limit(config.get("max_seconds"))
            with recorder:
                script_globals, stopped = run_script(script, list(config.get("args") or []))
            for note in notes:
                write("note", text=note)
    except StopScript as exc:  # the alarm fired outside the script (while unwinding)
        stopped = stopped or exc
    finally:
        hook.remove()
    recorder.snapshot()
    write("fallbacks", ops=dict(fallbacks.ops))
    write("remap_counts", remaps=[[site, what, n] for (site, what), n in log.counts.items()])
    end = outcome_of(stopped, frames)
    write("end", seconds=round(time.monotonic() - started, 3), **end)
    if config.get("divergence") and callable(script_globals.get("get_model_and_inputs")):
        run_divergence(script_globals["get_model_and_inputs"], target, log, adapter, write, end,
                       recorder.failing_op is not None)
    if hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, 0)
    return 0


def run_divergence(factory: Any, target: str, log: Any, adapter: Any, write: RecordWriter,
                   end: dict[str, Any], op_failed: bool) -> None:
    """CPU vs target outputs of the script's get_model_and_inputs(), and the first divergent module."""
    if end["outcome"] == "stopped-time":
        write("divergence", status="skipped", reason="the time limit was reached first")
        return
    if op_failed:
        write("divergence", status="skipped", reason="an op already failed on the target")
        return
    from porting_cli.divergence import first_divergence
    from porting_cli.remap import remap_cuda

    try:
        with remap_cuda(target, log, adapter):
            model, inputs = factory()
        write("divergence", **first_divergence(model, inputs, target))
    except StopScript:
        write("divergence", status="skipped", reason="the time limit was reached")
    except Exception as exc:  # noqa: BLE001 - the check is advisory; say why it failed
        write("divergence", status="error", reason=f"{type(exc).__name__}: {_one_line(exc)}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
