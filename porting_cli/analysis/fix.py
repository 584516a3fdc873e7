"""Codemods that make a script device-agnostic.

``fix_source`` applies the edits that the static rules (``porting_cli.analysis.scan``)
register for their fixable findings and keeps the rest of the file byte for
byte. Fixes that need the device bind it once, after the module's imports::

    DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")

(``ACCEL_DEVICE`` if the script already uses the name ``DEVICE``), so the
fixed script runs on CUDA, on any other accelerator, and on a CPU-only machine.
Some fixes need more of the prelude (``PRELUDE``): the device type that CUDA
tests compare with, and two small helper functions. Each part follows a
``# neuron-check:`` comment, which is how a later scan recognises it.

Speed: the edits are text splices on the scan's own ``ast`` positions
(porting_cli/analysis/scan/apply.py), and the prelude goes after the leading imports of the
scan's tree, so the only parse here is the final syntax check; this module imports
none of the scan, so a patch read from the cache costs nothing.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING

from porting_cli.analysis.scan.findings import Finding
from porting_cli.analysis.scan.compose import DEVICE_COMMENT, PRELUDE, compose  # noqa: F401 (re-exported)
from porting_cli.analysis.scan.source import read_source

if TYPE_CHECKING:
    from porting_cli.analysis.scan.engine import Analysis

@dataclasses.dataclass(frozen=True)
class FixResult:
    new_text: str
    applied: list[Finding]
    remaining: list[Finding]
    path: str = "<string>"
    old_text: str = ""
    #: lines changed by an edit the other fixes need, with no finding of its own (DDP's
    #: `device_ids` for the CPU fallback: porting_cli/analysis/scan/distributed.py)
    companion_lines: frozenset[int] = frozenset()

    @property
    def changed(self) -> bool:
        return self.new_text != self.old_text

    @property
    def written_names(self) -> frozenset[str]:
        """Every name a fix can write (torch, the device variable, the prelude's helpers): a
        NameError on one of them in the fixed file is the fix's (porting_cli/runtime/verify.py)."""
        from porting_cli.analysis.scan.rules import prelude_names

        names = {"torch", "DEVICE", "ACCEL_DEVICE"}
        for device in ("DEVICE", "ACCEL_DEVICE"):
            names |= set(prelude_names(device).values())
        return frozenset(names)

    def diff(self, file: str | None = None) -> str:
        """The patch, naming `file` (default: the path it was fixed as) the way `git apply` finds it."""
        return unified_diff(patch_path(file or self.path), self.old_text, self.new_text)


def fix_source(text: str, path: str = "<string>") -> FixResult:
    """Apply every automatic fix to ``text``; raises ScanError on a syntax error."""
    from porting_cli.analysis.scan.checked import analyze_checked, syntax_problem

    analysis = analyze_checked(text, path)
    applied = [f for f in analysis.findings if f.fixable]
    remaining = [f for f in analysis.findings if not f.fixable]
    if not applied:
        return FixResult(text, [], remaining, path, text)
    composed = compose(analysis, force_torch=analysis.force_torch)
    # a fix must never break the syntax; top-level statements parse on their own, and each
    # one an edit changed was checked already (porting_cli.analysis.scan.checked): the prelude is left
    problem = syntax_problem(composed.prelude) if composed.prelude else None
    if composed.text is None or problem is not None:  # pragma: no cover - checked drops such edits
        unfixed = [dataclasses.replace(f, fixable=False) for f in analysis.findings]
        return FixResult(text, [], unfixed, path, text)
    new_text = composed.text
    ctx = analysis.ctx
    companions = frozenset(node.lineno for key, (node, _) in ctx.companions.items() if key in ctx.edits)
    return FixResult(new_text, applied, remaining, path, text, companions)


def patch_path(path: str) -> str:
    """How a patch names `path` so that `git apply` finds it: relative to the top of the git
    repository holding it, else to the working folder (where a patch outside a repository is
    applied). A path as given (`/tmp/x/train.py`) made `a//tmp/x/train.py`, which git refuses."""
    if path.startswith("<"):  # text fixed without a file ("<string>")
        return path
    target = Path(path).resolve()
    base = next((folder for folder in target.parents if (folder / ".git").exists()), None) or Path.cwd()
    return Path(os.path.relpath(target, base)).as_posix()


def unified_diff(path: str, old: str, new: str) -> str:
    """A ``diff -u`` style patch from ``old`` to ``new`` (empty when equal)."""
    if old == new:  # most files of a project: difflib would still index every line
        return ""
    import difflib

    def lines(text: str) -> list[str]:
        out = text.splitlines(keepends=True)
        if out and not out[-1].endswith(("\n", "\r")):
            out[-1] += "\n\\ No newline at end of file\n"
        return out
    return "".join(difflib.unified_diff(lines(old), lines(new), fromfile=f"a/{path}", tofile=f"b/{path}"))


def fix_file(path: str | Path, write: bool = True) -> FixResult:
    """Fix one file; with ``write`` the file is rewritten in place and the original
    kept as ``FILE.orig`` (an existing ``FILE.orig`` is left as it is)."""
    import shutil

    text = read_source(path)
    result = fix_source(text, str(path))
    if write and result.changed:
        p = Path(path)
        backup = p.with_name(p.name + ".orig")
        if not backup.exists():
            shutil.copy2(p, backup)
        with open(p, "w", encoding="utf-8", newline="") as fh:
            fh.write(result.new_text)
    return result
