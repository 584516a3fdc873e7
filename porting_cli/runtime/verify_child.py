"""The child process of `--fix --verify`: runs modules' imports on the target device.

`python -m porting_cli.runtime.verify_child CONFIG.json` (started by porting_cli/runtime/verify.py).
It opens the device the way the porting trace does (porting_cli/runtime/trace_child.py), then runs
each import of the config in turn, with `cuda` remapped to the target (porting_cli/runtime/remap.py)
as the trace runs a script: the module's statements up to the start of its work
(porting_cli/runtime/verify_scope.py), under a time limit. Each run reads the project's files from
an overlay (path -> text: the fixed texts, or the originals), never from the disk, so the original
and the fixed project are both run whatever --fix has written. A run's outcome is appended to the
records file the moment it is known (porting_cli/runtime/trace_record.RecordWriter), so a child
killed at the time limit still leaves the runs it finished.

Runs are isolated as far as one interpreter allows: each gets a fresh module, and the project's
modules it imported, `os.environ`, `sys.path`, `sys.argv` and the working folder are put back
after it. The fixed runs go first, so no original's side effect can hide a defect of a fix.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.machinery
import importlib.util
import json
import linecache
import os
import signal
import sys
import types
from typing import Any, Iterator

from porting_cli.runtime.trace_record import RecordWriter, StopScript, one_line


class _OverlayLoader(importlib.machinery.SourceFileLoader):
    """A source loader that compiles the overlay's text of its file (no bytecode cache)."""

    overlay: dict[str, str] = {}

    def get_source(self, fullname: str) -> str:
        text = self.overlay.get(os.path.abspath(self.path))
        return text if text is not None else super().get_source(fullname)

    def get_code(self, fullname: str) -> Any:
        path = os.path.abspath(self.path)
        if path not in self.overlay:
            return super().get_code(fullname)
        return compile(self.overlay[path], path, "exec", dont_inherit=True)


class _OverlayFinder:
    """Finds modules as Python does; those whose file is in the overlay load its text."""

    @classmethod
    def find_spec(cls, name: str, path: Any = None, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.origin and os.path.abspath(spec.origin) in _OverlayLoader.overlay:
            spec.loader = _OverlayLoader(name, spec.origin)
        return spec


def _remember_lines(overlay: dict[str, str]) -> None:
    """Tracebacks quote the overlay's lines, not the disk's (mtime None: never rechecked)."""
    for path, text in overlay.items():
        linecache.cache[path] = (len(text), None, text.splitlines(keepends=True), path)


@contextlib.contextmanager
def _isolated(root: str) -> Iterator[None]:
    saved_env, saved_path, saved_argv = dict(os.environ), sys.path[:], sys.argv[:]
    saved_main, saved_cwd, known = sys.modules.get("__main__"), os.getcwd(), set(sys.modules)
    try:
        yield
    finally:
        if hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, 0)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.path[:], sys.argv[:] = saved_path, saved_argv
        sys.modules["__main__"] = saved_main
        with contextlib.suppress(OSError):
            os.chdir(saved_cwd)
        for name in set(sys.modules) - known:
            if _in_project(sys.modules[name], root):
                del sys.modules[name]


def _in_project(module: Any, root: str) -> bool:
    places = [getattr(module, "__file__", None) or "", *list(getattr(module, "__path__", None) or [])]
    return any(os.path.abspath(p).startswith(root + os.sep) for p in places if p)


def _fresh_module(run: dict[str, Any]) -> types.ModuleType:
    """The module object the run executes in: `__main__` for a script, else as imported."""
    name, path = run["module"], run["path"]
    if name == "__main__":
        module = types.ModuleType("__main__")
        module.__dict__.update(__file__=path, __cached__=None, __loader__=None, __package__=None,
                               __spec__=None, __builtins__=__builtins__)
        sys.modules["__main__"] = module
        return module
    parent = name.rpartition(".")[0]
    if parent:
        importlib.import_module(parent)  # as Python imports a submodule: its packages first
    search = sys.modules[parent].__path__ if parent else None
    spec = importlib.machinery.PathFinder.find_spec(name, search)
    if spec is None or spec.origin is None or os.path.abspath(spec.origin) != path:
        raise ImportError(f"{name} is not {path} with the project root on sys.path", name=name)
    spec.loader = _OverlayLoader(name, spec.origin)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    return module


def run_import(run: dict[str, Any], target: str, adapter: Any, timeout_s: float) -> dict[str, Any]:
    """One import run: its outcome, and where it failed ((file, line) of the user's innermost frame)."""
    from porting_cli.runtime.frames import UserFrames
    from porting_cli.runtime.remap import RemapLog, remap_cuda
    from porting_cli.runtime.trace_child import arm_time_limit
    from porting_cli.runtime.verify_scope import import_part

    path, root = run["path"], run["root"]
    frames = UserFrames(path, root)
    overlay = {os.path.abspath(p): text for p, text in run["overlay"].items()}
    _OverlayLoader.overlay = overlay
    _remember_lines(overlay)
    part = import_part(ast.parse(overlay[path], path))
    code = compile(ast.Module(body=part.body, type_ignores=[]), path, "exec", dont_inherit=True)
    record: dict[str, Any] = {"id": run["id"], "stop_line": part.stop_line, "stop_reason": part.stop_reason}
    with _isolated(root):
        sys.path[0:1] = [run["sys_path"]]
        sys.argv[:] = [path, *run.get("argv", [])]
        try:
            with remap_cuda(target, RemapLog(frames), adapter):
                arm_time_limit(timeout_s)
                module = _fresh_module(run)
                exec(code, module.__dict__)
            record["outcome"] = "ok"
        except StopScript:
            record["outcome"] = "timeout"
        except SystemExit as exc:
            code_ = exc.code
            failed = not (code_ is None or code_ == 0)
            record.update(outcome="raised" if failed else "ok")
            if failed:
                record["exception"] = _describe(exc, frames)
        except BaseException as exc:  # noqa: BLE001 - every way an import fails is the verdict
            record.update(outcome="raised", exception=_describe(exc, frames))
    return record


def _describe(exc: BaseException, frames: Any) -> dict[str, Any]:
    where = None
    tb = exc.__traceback__
    while tb is not None:
        if frames.is_user(tb.tb_frame.f_code.co_filename):
            where = (os.path.abspath(tb.tb_frame.f_code.co_filename), tb.tb_lineno)
        tb = tb.tb_next
    if isinstance(exc, SyntaxError) and exc.filename and frames.is_user(exc.filename):
        where = (os.path.abspath(exc.filename), exc.lineno or 1)  # a broken module it imported
    message = one_line(exc, 1000) if not isinstance(exc, SystemExit) else f"sys.exit({exc.code!r})"
    return {"type": type(exc).__name__, "message": message, "name": getattr(exc, "name", None),
            "file": where[0] if where else None, "line": where[1] if where else None}


def main(config_path: str) -> int:
    with open(config_path, encoding="utf-8") as handle:
        config = json.load(handle)
    from porting_cli.runtime.trace_tree import die_with_parent

    die_with_parent()
    write = RecordWriter(config["records"])
    try:
        from conformance.backends.opening import resolve_device

        adapter, target = resolve_device(config.get("device"))
    except Exception as exc:  # noqa: BLE001 - told to the parent as one sentence
        write("setup_error", message=str(exc).rstrip(".") + ".")
        return 2
    import torch  # noqa: F401 - opened above; the runs' own `import torch` finds it loaded

    write("start", device=target, backend=adapter.name, simulated=adapter.simulated)
    sys.meta_path.insert(0, _OverlayFinder)
    for run in config["runs"]:
        write("import", **run_import(run, target, adapter, float(config["timeout_s"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
