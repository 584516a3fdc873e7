"""The trace in the script's child processes: `mp.spawn` ranks, `mp.Process`, torchrun-style
workers, any Python process the script starts.

The root of the trace (porting_cli/runtime/trace_child.py) puts a folder holding `sitecustomize.py` at
the front of PYTHONPATH and names its config in CONFIG_ENV, so every Python process started
below it runs `bootstrap()` at start-up. That costs nothing until the process imports torch:
then the target device is set up and the remap, the op recorder and the step limit are
installed for the rest of the process, exactly as in the root. A process forked from a traced
one (mp.Process with the fork start method, DataLoader workers) keeps the tracing it inherits
and switches to its own records file (`follow_forks`).

A descendant that reaches --max-steps writes its end record and exits with status 0, so
`mp.spawn` in the root sees a rank that finished; the root's time limit ends the whole tree.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.abc
import importlib.util
import json
import os
import signal
import sys
from typing import Any

CONFIG_ENV = "NEURON_CHECK_TRACE_CONFIG"

SITECUSTOMIZE = '''\
# Written by neuron-check for the porting trace: trace this Python process too.
import os as _os
import sys as _sys

if _os.environ.get("NEURON_CHECK_TRACE_CONFIG"):
    _sys.path.append({package_parent!r})  # last: the user's own modules come first
    try:
        from porting_cli.runtime.trace_rank import bootstrap as _bootstrap
    except Exception:  # a process that cannot import neuron-check runs untraced
        _bootstrap = None
    if _bootstrap is not None:
        _bootstrap(__file__)
'''


def write_sitecustomize(folder: str) -> str:
    """Write the start-up hook into `folder`; returns the folder for PYTHONPATH."""
    os.makedirs(folder, exist_ok=True)
    # the folder holding the porting_cli package (this file is porting_cli/runtime/...)
    parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(folder, "sitecustomize.py"), "w", encoding="utf-8") as handle:
        handle.write(SITECUSTOMIZE.format(package_parent=parent))
    return folder


def bootstrap(hook_file: str) -> None:
    """Run by sitecustomize in a descendant: trace it once torch has been imported."""
    from porting_cli.runtime.trace_tree import die_with_parent

    die_with_parent()
    _chain_shadowed_sitecustomize(os.path.dirname(os.path.abspath(hook_file)))
    with open(os.environ[CONFIG_ENV], encoding="utf-8") as handle:
        config = json.load(handle)
    if "torch" in sys.modules:
        start_tracing(config)
    else:
        sys.meta_path.insert(0, _AfterTorchImport(config))


def _chain_shadowed_sitecustomize(our_folder: str) -> None:
    """Ours shadows any sitecustomize of the environment: import that one as well."""
    saved_path, ours = sys.path[:], sys.modules.pop("sitecustomize", None)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != our_folder]
        if importlib.util.find_spec("sitecustomize") is not None:
            importlib.import_module("sitecustomize")
    except Exception:  # noqa: BLE001 - the environment's own hook failing is not ours to report
        pass
    finally:
        sys.path[:] = saved_path
        if ours is not None:
            sys.modules["sitecustomize"] = ours


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """Finds torch as usual, and starts the trace when its import has finished."""

    def __init__(self, config: dict[str, Any]):
        self.config = config

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module
        config = self.config

        def exec_then_trace(module: Any) -> None:
            exec_module(module)
            start_tracing(config)

        spec.loader.exec_module = exec_then_trace  # type: ignore[method-assign]
        return spec


def start_tracing(config: dict[str, Any]) -> None:
    """Install device, remap, recorder and step limit for the rest of this process."""
    from porting_cli.runtime.frames import UserFrames
    from porting_cli.runtime.trace_record import RecordWriter, make_recorder, process_records_path

    write = RecordWriter(process_records_path(config["records"]))
    try:
        from conformance.backends.opening import resolve_device

        adapter, target = resolve_device(config.get("device"))
    except Exception as exc:  # noqa: BLE001 - told in the report; the process runs untraced
        write("process", pid=os.getpid(), ppid=os.getppid(), how="exec", argv=sys.argv[:4])
        write("note", text=f"a child process could not use the device: {exc}")
        return
    import torch

    from porting_cli.runtime.remap import remap_cuda
    from porting_cli.runtime.remap_log import RemapLog

    frames = UserFrames(config["script"], config.get("root"), config.get("display_base"))
    recorder = make_recorder(torch.device(target).type, frames, write)
    log = RemapLog(frames, on_new=lambda site, what: write("remap", site=site, what=what))
    stack = contextlib.ExitStack()
    fallbacks = stack.enter_context(adapter.track_fallbacks())
    notes = stack.enter_context(remap_cuda(target, log, adapter))
    stack.enter_context(recorder)
    trace = ProcessTrace(config["records"], write, recorder, log, fallbacks, notes, stack)
    write("process", pid=os.getpid(), ppid=os.getppid(), how="exec", argv=sys.argv[:4])
    trace.install(int(config.get("max_steps") or 0))
    record_process_exceptions(trace, frames)


def record_process_exceptions(trace: "ProcessTrace", frames: Any, in_spawned_child: bool = True) -> None:
    """A child process's exception is written with its own user line (the root only sees
    mp.spawn's ProcessRaisedException at the spawn call): for `mp.Process` targets, and, in a
    spawned child, for the function `torch.multiprocessing.spawn` runs there (its wrapper
    catches the exception). The root must keep the real wrapper: it pickles it by name."""
    import multiprocessing.process

    from porting_cli.runtime.trace_record import describe_exception

    def recording(call: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return call(*args, **kwargs)
            except Exception as exc:
                trace.write("exception", **describe_exception(exc, frames))
                raise

        return run

    base = multiprocessing.process.BaseProcess
    original_run = base.run
    base.run = lambda self: recording(original_run)(self)  # type: ignore[method-assign]
    spawn = sys.modules.get("torch.multiprocessing.spawn")
    if spawn is not None and in_spawned_child:
        original_wrap = spawn._wrap

        def wrap(fn: Any, i: int, args: Any, error_file: Any) -> Any:
            trace.write("rank", rank=i)  # mp.spawn's process index, the rank by convention
            return original_wrap(recording(fn), i, args, error_file)

        spawn._wrap = wrap


class ProcessTrace:
    """One traced descendant process: its step limit, its end record, its forks."""

    def __init__(self, records: str, write: Any, recorder: Any, log: Any, fallbacks: Any, notes: list[str],
                 stack: contextlib.ExitStack | None):
        self.records = records  # the root's records file: each process writes its own beside it
        self.write, self.recorder, self.log = write, recorder, log
        self.fallbacks, self.notes, self.stack = fallbacks, notes, stack
        self.finished_in: int | None = None
        self.steps = 0

    def install(self, max_steps: int) -> None:
        from porting_cli.runtime.trace_record import install_step_limit, watch_slow_ops

        def on_step(n: int) -> None:
            self.steps = n
            self.write("step", n=n)
            self.snapshot()

        def stop_at_limit() -> None:
            self.finish("stopped-steps")
            sys.exit(0)  # the rank is done; mp.spawn sees a clean exit

        install_step_limit(max_steps, on_step, stop_at_limit)
        watch_slow_ops(self.recorder, self.write)
        atexit.register(self.finish, "finished")
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, self._on_term)
        follow_forks(self)

    def _on_term(self, signum: int, frame: Any) -> None:
        self.finish("terminated")  # the root at its limit, or mp.spawn ending a failed rank's siblings
        os._exit(128 + signum)

    def snapshot(self) -> None:
        self.recorder.snapshot()
        rank = _rank()
        if rank is not None:
            self.write("rank", rank=rank)

    def finish(self, outcome: str) -> None:
        """Write what this process learned; once per process (forks inherit the call)."""
        if self.finished_in == os.getpid():
            return
        self.finished_in = os.getpid()
        self.snapshot()
        if self.stack is not None and self.fallbacks is not None:
            with contextlib.suppress(Exception):
                self.stack.close()  # the fallback tracker fills in on exit
            self.write("fallbacks", ops=dict(self.fallbacks.ops))
        for note in self.notes:
            self.write("note", text=note)
        self.write("remap_counts", remaps=[[site, what, n] for (site, what), n in self.log.counts.items()])
        self.write("end", outcome=outcome, steps=self.steps)


def follow_forks(trace: ProcessTrace) -> None:
    """A forked child keeps the inherited tracing but writes its own records file."""
    from porting_cli.runtime.trace_record import process_records_path

    def after_fork_in_child() -> None:
        trace.write.reopen(process_records_path(trace.records))
        trace.recorder.reset_after_fork()
        trace.log.counts.clear()
        trace.finished_in, trace.steps = None, 0
        trace.write("process", pid=os.getpid(), ppid=os.getppid(), how="fork", argv=[])
        from porting_cli.runtime.trace_record import watch_slow_ops

        watch_slow_ops(trace.recorder, trace.write)  # threads do not survive a fork
        import multiprocessing.util

        multiprocessing.util.Finalize(None, trace.finish, args=("finished",), exitpriority=100)
        atexit.register(trace.finish, "finished")

    os.register_at_fork(after_in_child=after_fork_in_child)


def _rank() -> int | None:
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
            return int(torch.distributed.get_rank())
    except Exception:  # noqa: BLE001 - a half-torn-down process group has no rank to tell
        return None
    rank = os.environ.get("RANK")
    return int(rank) if rank and rank.isdigit() else None
