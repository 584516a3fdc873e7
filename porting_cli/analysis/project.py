"""Project mode: the Python files of a folder (a repository) and the entry script to run.

`neuron-check PATH` with PATH a folder scans every `.py` below it, skipping `.git`, virtual
environments (a folder holding `pyvenv.cfg`, or named venv/.venv/env), `build/`,
`site-packages`, `__pycache__` and whatever `.gitignore` files ignore (porting_cli/analysis/gitignore.py).
Symbolic links are followed once: a link back into a folder already walked is a loop, skipped
with a warning. The runtime check runs one entry script: `--entry FILE`, or the file given,
or the folder's top-level `train.py` / `main.py` when exactly one of them exists.
Imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from op_db.errors import InputError
from porting_cli.analysis.gitignore import IgnoreFile, is_ignored

SKIPPED_DIR_NAMES = frozenset({".git", ".hg", ".svn", "venv", ".venv", "env", "build", "site-packages",
                               "__pycache__", ".tox", ".nox", ".mypy_cache", ".pytest_cache"})
ENTRY_CANDIDATES = ("train.py", "main.py")


def is_skipped_dir(path: str) -> bool:
    """A folder that holds no project code: VCS data, a virtualenv, build output, caches."""
    return os.path.basename(path) in SKIPPED_DIR_NAMES or os.path.isfile(os.path.join(path, "pyvenv.cfg"))


@dataclasses.dataclass(frozen=True)
class Project:
    """What project mode works on. `files` and `entry` are posix paths relative to `root`."""

    root: str  # absolute
    files: tuple[str, ...]
    entry: str | None
    warnings: tuple[str, ...]
    is_folder: bool

    def path(self, rel: str) -> str:
        return os.path.join(self.root, *rel.split("/"))

    def require_entry(self) -> str:
        """The entry script's absolute path, or the InputError that says how to name one."""
        if self.entry is None:
            found = [name for name in ENTRY_CANDIDATES if name in self.files]
            why = "both train.py and main.py exist" if found else "it has no top-level train.py or main.py"
            raise InputError(f"cannot tell which script of {self.root} to run ({why}); "
                             "name it with --entry FILE, or use --static-only.")
        return self.path(self.entry)


def discover(path: str, entry: str | None = None) -> Project:
    """The project at `path` (a folder or one .py file); InputError for what cannot be used."""
    if os.path.islink(path) and not os.path.exists(path):
        raise InputError(f"{path} is a broken symbolic link or a symbolic link loop.")
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file.")
    if os.path.isdir(path) and path.rstrip("/").endswith(".py"):  # meant a script, got a folder
        raise InputError(f"{path} is a directory, not a Python file.")
    if not os.path.isdir(path):
        root = os.path.dirname(os.path.abspath(path))
        name = os.path.basename(path)
        return Project(root, (name,), _entry(root, entry, default=name), (), False)
    root = os.path.abspath(path)
    files, warnings = walk(root)
    if not files:
        raise InputError(f"{path} holds no Python files (after skipping virtualenvs, build output "
                         "and what .gitignore ignores).")
    default = None
    found = [name for name in ENTRY_CANDIDATES if name in files]
    if len(found) == 1:
        default = found[0]
    return Project(root, tuple(files), _entry(root, entry, default), tuple(warnings), True)


def _entry(root: str, entry: str | None, default: str | None) -> str | None:
    if entry is None:
        return default
    for candidate in (os.path.abspath(entry), os.path.join(root, entry)):
        if os.path.isfile(candidate):
            rel = os.path.relpath(candidate, root)
            if rel.startswith(".."):
                raise InputError(f"--entry {entry} is outside the project {root}.")
            return rel.replace(os.sep, "/")
    raise InputError(f"--entry {entry}: no such file (looked in the current folder and in {root}).")


def walk(root: str) -> tuple[list[str], list[str]]:
    """Every .py file below `root` that the project's rules keep, sorted; and warnings."""
    files: list[str] = []
    warnings: list[str] = []
    seen_dirs: set[str] = set()
    seen_files: set[str] = set()

    def visit(folder: str, rel: str, ignores: list[IgnoreFile]) -> None:
        real = os.path.realpath(folder)
        if real in seen_dirs:
            warnings.append(f"{rel or '.'}: symbolic link loop (or a second link to a folder "
                            "already scanned); skipped.")
            return
        seen_dirs.add(real)
        ignores = ignores + _read_gitignore(folder, rel, warnings)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            warnings.append(f"{rel or '.'}: cannot be listed ({exc.strerror or exc}); skipped.")
            return
        for item in entries:
            child = f"{rel}/{item.name}" if rel else item.name
            try:
                is_dir = item.is_dir()  # follows links
            except OSError:
                is_dir = False
            if is_dir:
                if not is_skipped_dir(item.path) and not is_ignored(ignores, child, True):
                    visit(item.path, child, ignores)
            elif item.name.endswith(".py") and not is_ignored(ignores, child, False):
                if item.is_symlink() and not os.path.exists(item.path):
                    warnings.append(f"{child}: broken symbolic link or link loop; skipped.")
                    continue
                real_file = os.path.realpath(item.path)
                if real_file not in seen_files:
                    seen_files.add(real_file)
                    files.append(child)

    visit(root, "", [])
    return sorted(files), warnings


def _read_gitignore(folder: str, rel: str, warnings: list[str]) -> list[IgnoreFile]:
    path = os.path.join(folder, ".gitignore")
    if not os.path.isfile(path):
        return []
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return [IgnoreFile.parse(handle.read(), rel)]
    except OSError as exc:
        warnings.append(f"{rel + '/' if rel else ''}.gitignore cannot be read ({exc.strerror or exc}); not applied.")
        return []


@dataclasses.dataclass(frozen=True)
class ProjectScan:
    """The static scan of every file of a project: findings with root-relative paths."""

    result: Any  # porting_cli.analysis.scan.ScanResult over all files
    files: list[dict[str, Any]]  # one summary per scanned file
    warnings: list[str]  # the project's warnings plus the files that could not be scanned
    patch: str = ""  # the unified diff of every file's automatic fixes (paths: porting_cli.analysis.fix.patch_path)


def scan_project(project: Project, jobs: int = 0) -> ProjectScan:
    """Scan each file with the single-file scan (through the content cache, misses on `jobs`
    worker processes: porting_cli.analysis.batch_scan); a file that is not UTF-8 or not valid Python
    is skipped with a warning and the scan goes on."""
    from porting_cli.analysis.scan import ScanError, ScanResult
    from porting_cli.analysis.batch_scan import ScanOptions, scan_paths

    findings: list[Any] = []
    files: list[dict[str, Any]] = []
    warnings = list(project.warnings)
    patches: list[str] = []
    lines = 0
    from conformance.engine.progress import Estimate, Progress

    count = len(project.files)
    with Progress("scanning files", count, Estimate(range(count))) as bar:
        answers = scan_paths([(project.path(rel), rel) for rel in project.files], ScanOptions(jobs=jobs),
                             on_file=bar.step)
    for rel, scanned in zip(project.files, answers):
        if isinstance(scanned, ScanError):
            why = str(scanned).replace(project.path(rel), rel)
            warnings.append(f"skipped {rel}: {why}")
            files.append({"path": rel, "lines": 0, "findings": 0, "needs_change": 0, "fixable": 0, "error": why})
            continue
        findings += scanned.result.findings
        lines += scanned.result.lines
        patches.append(scanned.fix.diff(project.path(rel)))
        files.append({"path": rel, "lines": scanned.result.lines, "findings": len(scanned.result.findings),
                      "needs_change": sum(f.severity != "info" for f in scanned.result.findings),
                      "fixable": sum(f.fixable for f in scanned.result.findings)})
    return ProjectScan(ScanResult(path=project.root, findings=findings, lines=lines), files, warnings,
                       "".join(patches))
