"""The child process of the porting trace: runs the user's script on the target device.

`python -m porting_cli.runtime.trace_child CONFIG.json` (started by porting_cli/runtime/trace.py). The script
runs as `__main__` with `cuda` remapped to the target (porting_cli/runtime/remap.py) under a
TorchDispatchMode that records every aten overload touching the target, with its dtypes and
the user's source line. Everything learned is appended to the records file as JSON lines the
moment it is learned, so a script that crashes the process, calls `os._exit`, or is killed at
the time limit still leaves a partial record behind. Record kinds are listed in trace.py.

The script is executed the way `runpy.run_path(path, run_name="__main__")` does it (a fresh
`__main__` module, `sys.argv`, `sys.path[0]`), except that its globals are kept when it stops
early, so `get_model_and_inputs()` can still be called for the divergence check.

Python processes the script starts (mp.spawn ranks, mp.Process, torchrun-style workers) are
traced too (porting_cli/runtime/trace_rank.py), each into its own records file; when the script stops,
whatever of its process tree is still running is ended (porting_cli/runtime/trace_tree.py).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import types
from typing import Any

from porting_cli.runtime.trace_record import (
    RecordWriter,
    StopScript,
    describe_exception,
    install_step_limit,
    make_recorder,
    one_line,
    watch_slow_ops,
)

STOP_CHILDREN_GRACE_S = 1.0  # descendants write their end records on SIGTERM


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
    from porting_cli.runtime.trace_tree import die_with_parent

    die_with_parent()  # neuron-check killed: the trace goes with it
    write = RecordWriter(config["records"])
    try:
        from conformance.backends.opening import resolve_device

        adapter, target = resolve_device(config.get("device"))
    except Exception as exc:  # noqa: BLE001 - InputError and the like, told to the parent as one sentence
        write("setup_error", message=str(exc).rstrip(".") + ".")
        return 2
    import torch
    import torch._dynamo  # noqa: F401 - torch imports it lazily at the first call through a mode:
    # seconds on a busy machine, which must not come out of the script's --max-seconds

    from porting_cli.runtime.frames import UserFrames
    from porting_cli.runtime.remap import RemapLog, remap_cuda
    from porting_cli.runtime.trace_rank import (
        CONFIG_ENV,
        ProcessTrace,
        follow_forks,
        record_process_exceptions,
        write_sitecustomize,
    )

    script = os.path.abspath(config["script"])
    frames = UserFrames(script, config.get("root"), config.get("display_base"))
    write("start", device=target, backend=adapter.name, simulated=adapter.simulated,
          versions=adapter.versions(), pid=os.getpid())
    recorder = make_recorder(torch.device(target).type, frames, write)
    log = RemapLog(frames, on_new=lambda site, what: write("remap", site=site, what=what))
    # Python processes the script starts trace themselves (porting_cli/runtime/trace_rank.py).
    hook_dir = write_sitecustomize(os.path.join(os.path.dirname(config["records"]), "hook"))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (hook_dir, os.environ.get("PYTHONPATH")) if p)
    os.environ[CONFIG_ENV] = config_path
    forks = ProcessTrace(config["records"], write, recorder, log, None, [], None)
    follow_forks(forks)
    record_process_exceptions(forks, frames, in_spawned_child=False)  # inherited by mp.Process children forked from here
    root_pid = os.getpid()

    def on_step(n: int) -> None:
        write("step", n=n)
        recorder.snapshot()

    def stop_forked_child() -> None:
        if os.getpid() != root_pid:  # an mp.Process forked from the script: a clean exit
            forks.steps = steps["n"]
            forks.finish("stopped-steps")
            sys.exit(0)

    hook, steps = install_step_limit(int(config.get("max_steps") or 0), on_step, stop_forked_child)
    watch_slow_ops(recorder, write)
    stopped: BaseException | None = None
    script_globals: dict[str, Any] = {}
    started = time.monotonic()
    try:
        with adapter.track_fallbacks() as fallbacks, remap_cuda(target, log, adapter) as notes:
            forks.notes = notes
            started = time.monotonic()  # the budget is the script's: set-up above is not counted
            write("clock")  # the parent's deadline counts from here too
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
    stop_descendants(write)
    if config.get("divergence") and callable(script_globals.get("get_model_and_inputs")):
        run_divergence(script_globals["get_model_and_inputs"], target, log, adapter, write, end,
                       recorder.failing_op is not None)
    if hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, 0)
    return 0


def stop_descendants(write: RecordWriter) -> None:
    """No process of the script outlives it: the rest of the tree is ended here (and again by
    the parent, which also catches what this process could not)."""
    from porting_cli.runtime.trace_tree import TRACE_TOKEN_ENV, kill_tagged

    token = os.environ.get(TRACE_TOKEN_ENV)
    if token:
        left = kill_tagged(token, grace_s=STOP_CHILDREN_GRACE_S)
        if left:
            write("note", text=f"{left} process(es) started by the script were still running "
                               "when it stopped; they were ended")


def run_divergence(factory: Any, target: str, log: Any, adapter: Any, write: RecordWriter,
                   end: dict[str, Any], op_failed: bool) -> None:
    """CPU vs target outputs of the script's get_model_and_inputs(), and the first divergent module."""
    if end["outcome"] == "stopped-time":
        write("divergence", status="skipped", reason="the time limit was reached first")
        return
    if op_failed:
        write("divergence", status="skipped", reason="an op already failed on the target")
        return
    from porting_cli.runtime.divergence import first_divergence
    from porting_cli.runtime.remap import remap_cuda

    try:
        with remap_cuda(target, log, adapter):
            model, inputs = factory()
        write("divergence", **first_divergence(model, inputs, target))
    except StopScript:
        write("divergence", status="skipped", reason="the time limit was reached")
    except Exception as exc:  # noqa: BLE001 - the check is advisory; say why it failed
        write("divergence", status="error", reason=f"{type(exc).__name__}: {one_line(exc)}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
