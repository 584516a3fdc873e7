"""`--fix --verify`: the porting runtime proves that each fixed file still imports on the device.

`verify_fixes` takes the fixes (porting_cli.analysis.fix.FixResult: the original and the fixed text
of each file) and runs every fixed file's import, then every original's, in one child process on
the target (porting_cli/runtime/verify_child.py: the trace's device opening and CUDA remapping, the
statements up to the start of the script's work, porting_cli/runtime/verify_scope.py). The texts
travel in the config, so what is on the disk does not matter.

A failure is the fix's or the script's by comparing the two runs:

- the fixed text does not parse, or its import fails where the original's did not fail (a line
  the original ran past, a line the fix inserted, or a NameError of a name the fix writes):
  `fix-defect`, with the exception, file:line and the fixes on or before that line;
- both fail with the same exception at the same (original) line: `script`, the script's own
  failure, not the fix's;
- the fixed import fails past the point where the original's failed: `unproven`, since nothing
  after the original's failure was ever run; so is a run stopped at its time limit.

Single-file mode runs the script as `__main__` with its folder on `sys.path`; project mode runs each
file as the module its path names, with the project root on `sys.path` (relative imports work).
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from op_db.errors import InputError

SETUP_S = 120.0  # opening the device in the child, before the first run
DEFAULT_TIMEOUT_S = 30.0  # one import run
VERDICTS = ("ok", "fix-defect", "script", "unproven", "skipped")


@dataclasses.dataclass
class FileVerdict:
    path: str  # as displayed
    verdict: str  # one of VERDICTS
    module: str | None = None
    reason: str = ""
    exception: dict[str, Any] | None = None  # the fixed run's failure: type, message, site
    original: dict[str, Any] | None = None  # the original run's failure, where it had one
    fixes: list[str] = dataclasses.field(default_factory=list)  # rule ids on or before the failing line
    stopped_before: str | None = None  # "line 12 (the main guard)": what was not run

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Verification:
    device: str | None
    files: list[FileVerdict]

    @property
    def defective(self) -> list[FileVerdict]:
        return [f for f in self.files if f.verdict == "fix-defect"]

    @property
    def verdict(self) -> str:
        verdicts = {f.verdict for f in self.files}
        return next((v for v in ("fix-defect", "unproven", "script", "ok") if v in verdicts), "skipped")

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "verdict": self.verdict, "defective": len(self.defective),
                "files": [f.to_dict() for f in self.files]}


@dataclasses.dataclass(frozen=True)
class _File:
    fix: Any  # FixResult
    path: str  # absolute
    module: str | None  # None: not importable (the reason in `why`)
    why: str = ""


def module_name(root: str, path: str) -> tuple[str | None, str]:
    """The dotted name a project file imports as from `root`, or (None, why not)."""
    parts = list(Path(os.path.relpath(path, root)).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    if not parts or parts[0] == ".." or not all(p.isidentifier() for p in parts):
        return None, "its path is not a module name below the project root"
    return ".".join(parts), ""


def verify_fixes(fixes: Sequence[Any], *, root: str | None = None, device: str | None = "sim",
                 argv: Sequence[str] = (), timeout_s: float = DEFAULT_TIMEOUT_S,
                 display_base: str | None = None) -> Verification:
    """Run each changed file's fixed and original import on `device`; one verdict per file.

    `root`: project mode's folder (each file runs as its module); None: one script, as `__main__`.
    Raises InputError only when the device cannot be used."""
    files = [_file(fix, root) for fix in fixes if fix.changed]
    verdicts: dict[str, FileVerdict] = {}
    runnable = []
    for f in files:
        shown = _shown(f.path, display_base)
        if f.module is None:
            verdicts[f.path] = FileVerdict(shown, "skipped", reason=f.why)
        elif _parses(f.fix.old_text) and not _parses(f.fix.new_text):
            verdicts[f.path] = _syntax_defect(f, shown)
        elif not _parses(f.fix.old_text):
            verdicts[f.path] = FileVerdict(shown, "skipped", f.module, "the original does not parse")
        else:
            runnable.append(f)
    records, target = _run_child(runnable, files, root, device, list(argv), timeout_s) if runnable else ({}, device)
    by_path = {f.path: f.fix for f in files}
    for f in runnable:
        verdicts[f.path] = _judge(f, records.get(f"fixed:{f.path}"), records.get(f"original:{f.path}"),
                                  by_path, display_base)
    return Verification(target, [verdicts[f.path] for f in files])


def _file(fix: Any, root: str | None) -> _File:
    path = os.path.abspath(fix.path)
    if root is None:
        return _File(fix, path, "__main__")
    name, why = module_name(os.path.abspath(root), path)
    return _File(fix, path, name, why)


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _syntax_defect(f: _File, shown: str) -> FileVerdict:
    try:
        ast.parse(f.fix.new_text)
        raise AssertionError("unreachable: the caller saw it fail")  # pragma: no cover
    except SyntaxError as exc:
        line = exc.lineno or 1
        old_line, inserted = map_line(f.fix.old_text, f.fix.new_text, line)
        return FileVerdict(shown, "fix-defect", f.module, "the fixed file does not parse",
                           {"type": "SyntaxError", "message": exc.msg, "site": f"{shown}:{line}"},
                           fixes=_fixes_before(f.fix, old_line, inserted))


def _run_child(runnable: list[_File], files: list[_File], root: str | None, device: str | None,
               argv: list[str], timeout_s: float) -> tuple[dict[str, dict[str, Any]], str | None]:
    from porting_cli.runtime.trace_tree import TRACE_TOKEN_ENV, kill_tagged
    import uuid

    runs = []
    for version in ("fixed", "original"):  # the fixed runs first: see verify_child
        overlay = {f.path: (f.fix.new_text if version == "fixed" else f.fix.old_text) for f in files}
        for f in runnable:
            folder = os.path.abspath(root) if root else os.path.dirname(f.path)
            runs.append({"id": f"{version}:{f.path}", "path": f.path, "module": f.module, "root": folder,
                         "sys_path": folder, "argv": argv if root is None else [], "overlay": overlay})
    token = uuid.uuid4().hex
    with tempfile.TemporaryDirectory(prefix="neuron-check-verify-") as tmp:
        config, records = os.path.join(tmp, "config.json"), os.path.join(tmp, "records.jsonl")
        with open(config, "w", encoding="utf-8") as handle:
            json.dump({"device": device, "records": records, "timeout_s": timeout_s, "runs": runs}, handle)
        env = dict(os.environ, PYTHONUNBUFFERED="1", **{TRACE_TOKEN_ENV: token})
        if device and not device.startswith("sim"):
            env.pop("NEURON_CHECK_SIM_PROFILE", None)
        with open(os.path.join(tmp, "output.log"), "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "porting_cli.runtime.verify_child", config],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True, cwd=tmp)
            try:
                proc.wait(timeout=SETUP_S + len(runs) * (timeout_s + 5))
            except subprocess.TimeoutExpired:
                pass
            finally:
                _kill_session(proc)
                kill_tagged(token)
        found, target = {}, device
        for line in Path(records).read_text(encoding="utf-8").splitlines() if os.path.exists(records) else []:
            record = json.loads(line)
            kind = record.pop("kind")
            if kind == "setup_error":
                raise InputError(record["message"])
            if kind == "start":
                target = record["device"]
            elif kind == "import":
                found[record["id"]] = record
    return found, target


def _kill_session(proc: subprocess.Popen) -> None:
    import signal

    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.wait()


def _judge(f: _File, fixed: dict[str, Any] | None, original: dict[str, Any] | None,
           by_path: dict[str, Any], base: str | None) -> FileVerdict:
    shown = _shown(f.path, base)
    stop = fixed or original or {}
    stopped = f"line {stop['stop_line']} ({stop['stop_reason']})" if stop.get("stop_line") else None
    verdict = FileVerdict(shown, "ok", f.module, stopped_before=stopped)
    if fixed is None or fixed["outcome"] == "timeout":
        verdict.verdict, verdict.reason = "unproven", "the fixed import did not finish within its time limit"
        return verdict
    if original is not None and original["outcome"] == "raised":
        verdict.original = _shown_exception(original["exception"], base)
    if fixed["outcome"] == "ok":
        verdict.reason = "the fixed file imports" + (" (the original failed)" if verdict.original else "")
        return verdict
    failure = fixed["exception"]
    verdict.exception = _shown_exception(failure, base)
    where = _original_place(failure, by_path)  # (file, original line, in text the fix wrote)
    old_failure = original["exception"] if original and original["outcome"] == "raised" else None
    old_where = (old_failure["file"], old_failure["line"]) if old_failure else None
    fix_name = failure["type"] == "NameError" and failure.get("name") in f.fix.written_names
    if old_failure and failure["type"] == old_failure["type"] and where[:2] == old_where and not where[2]:
        verdict.verdict, verdict.reason = "script", "the original fails the same way: the script's failure, not the fix's"
    elif (where[2] or fix_name or original is None or original["outcome"] != "raised"
          or (where[0] == old_where[0] and where[1] is not None and where[1] < old_where[1])):
        verdict.verdict, verdict.reason = "fix-defect", "the fixed file fails at import where the original does not"
        fix = by_path.get(where[0])
        verdict.fixes = _fixes_before(fix, where[1], where[2]) if fix is not None else []
    else:
        verdict.verdict = "unproven"
        verdict.reason = "the original fails first; the fixed file fails past that point, which was never run"
    return verdict


def _original_place(failure: dict[str, Any], by_path: dict[str, Any]) -> tuple[str | None, int | None, bool]:
    path, line = failure.get("file"), failure.get("line")
    fix = by_path.get(path)
    if fix is None or line is None:
        return path, line, False
    old_line, inserted = map_line(fix.old_text, fix.new_text, line)
    return path, old_line, inserted


def map_line(old: str, new: str, line: int) -> tuple[int, bool]:
    """The original line that line `line` of the fixed text stands for, and whether the fix
    wrote it (a changed or inserted line: then the original line it replaced or precedes)."""
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if j1 < line <= j2 or (tag == "delete" and j1 == line - 1 == j2):
            if tag == "equal":
                return i1 + line - j1, False
            return i1 + 1, True
    return line, False


def _fixes_before(fix: Any, line: int | None, inserted: bool) -> list[str]:
    """The rule ids of the fixes applied on or before `line`; all of them for text the fix
    inserted with no line of its own before it (the prelude serves every fix)."""
    ids = [f.rule_id for f in fix.applied if line is None or f.line <= line]
    if inserted and not ids:
        ids = [f.rule_id for f in fix.applied]
    return sorted(set(ids))


def _shown(path: str | None, base: str | None) -> str:
    from porting_cli.runtime.frames import display_path

    return display_path(path, base) if path else "?"


def _shown_exception(exc: dict[str, Any], base: str | None) -> dict[str, Any]:
    site = f"{_shown(exc['file'], base)}:{exc['line']}" if exc.get("file") else None
    return {"type": exc["type"], "message": exc["message"], "site": site}
