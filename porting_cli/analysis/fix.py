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
from porting_cli.analysis.scan.rules import DEVICE_EXPR, prelude_names
from porting_cli.analysis.scan.source import read_source

if TYPE_CHECKING:
    from porting_cli.analysis.scan.engine import Analysis

DEVICE_COMMENT = "# neuron-check: the current accelerator, or the CPU where there is none"

#: prelude parts in order: the comment above and the code, with {device} {type} {device_for} {bf16}
PRELUDE: tuple[tuple[str, str, str], ...] = (
    ("device", DEVICE_COMMENT, "{device} = " + DEVICE_EXPR + "\n"),
    ("type", '# neuron-check: the device type CUDA tests look for: the accelerator\'s, or "cuda" where '
             "there is none",
     '{type} = {device}.type if {device}.type != "cpu" else "cuda"\n'),
    ("device_for", "# neuron-check: what a CUDA device argument meant, on the current accelerator",
     "def {device_for}(device):\n"
     "    if device is None:\n"
     "        return {device}\n"
     "    if isinstance(device, int):\n"
     "        return torch.device({device}.type, device)\n"
     "    device = torch.device(device)\n"
     '    return torch.device({device}.type, device.index) if device.type == "cuda" else device\n'),
    ("bf16", "# neuron-check: torch.cuda.is_bf16_supported() asked of the current accelerator",
     "def {bf16}(*args, **kwargs):\n"
     '    check = getattr(torch.get_device_module({device}), "is_bf16_supported", None)\n'
     '    return check(*args, **kwargs) if check is not None else {device}.type != "cpu"\n'),
    ("memory", "# neuron-check: a torch.accelerator memory statistic; `default` where the backend keeps none",
     "def {memory}(name, default, *args, **kwargs):\n"
     "    if not torch.accelerator.is_available():\n"
     "        return default\n"
     "    try:\n"
     "        return getattr(torch.accelerator, name)(*args, **kwargs)\n"
     "    except RuntimeError:  # the backend's allocator keeps no statistics\n"
     "        return default\n"),
)


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

    def diff(self, file: str | None = None) -> str:
        """The patch, naming `file` (default: the path it was fixed as) the way `git apply` finds it."""
        return unified_diff(patch_path(file or self.path), self.old_text, self.new_text)


def _prelude_text(parts: set[str], device_name: str, existing: set[str], need_torch: bool) -> str:
    names = prelude_names(device_name)
    chunks = ["import torch\n"] if need_torch else []
    for part, comment, code in PRELUDE:
        if part in parts and names[part] not in existing:
            spacing = "\n\n" if code.startswith("def ") else "\n"
            chunks.append(spacing + comment + "\n" + code.format(**names))
    if any(code.startswith("def ") for part, _, code in PRELUDE if part in parts and names[part] not in existing):
        chunks.append("\n\n")
    return "".join(chunks)


def _insertion_line(tree: ast.Module) -> int:
    """0-based line before which the prelude goes: after the leading imports (and docstring)."""
    body = tree.body
    index = 0
    for i, stmt in enumerate(body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            index = i + 1
        elif not (i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                  and isinstance(stmt.value.value, str)):
            break
    if index == 0:
        if not body:
            return 0
        first = body[0]
        decorators = getattr(first, "decorator_list", None) or []
        return min([first.lineno, *(d.lineno for d in decorators)]) - 1
    return body[index - 1].end_lineno or body[index - 1].lineno


def _imports_torch(tree: ast.Module) -> bool:
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname is None and alias.name.split(".")[0] == "torch":
                    return True
                if alias.asname == "torch" and alias.name == "torch":
                    return True
    return False


def _existing_prelude(analysis: Analysis) -> set[str]:
    """Names that neuron-check's prelude of an earlier fix already binds."""
    skip = analysis.ctx.skip_lines
    names: set[str] = set()
    for stmt in analysis.tree.body:
        if stmt.lineno in skip:
            if isinstance(stmt, ast.Assign):
                names.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
            elif isinstance(stmt, ast.FunctionDef):
                names.add(stmt.name)
    return names


def fix_source(text: str, path: str = "<string>") -> FixResult:
    """Apply every automatic fix to ``text``; raises ScanError on a syntax error."""
    from porting_cli.analysis.scan.apply import apply_edits
    from porting_cli.analysis.scan.checked import analyze_checked, syntax_problem

    analysis = analyze_checked(text, path)
    applied = [f for f in analysis.findings if f.fixable]
    remaining = [f for f in analysis.findings if not f.fixable]
    if not applied:
        return FixResult(text, [], remaining, path, text)
    tree = analysis.tree
    at = _insertion_line(tree)  # the leading imports that the prelude follows keep their lines
    fixed = apply_edits(analysis, analysis.ctx.source.starts[at])
    bom = text[:len(text) - len(text.removeprefix("\ufeff"))]
    prelude = _prelude_text(fixed.prelude, analysis.ctx.device_name, _existing_prelude(analysis),
                            not _imports_torch(tree))
    new_text = bom + fixed.head + _joint(fixed.head, fixed.tail) + prelude + fixed.tail
    # a fix must never break the syntax; top-level statements parse on their own, and each
    # one an edit changed was checked already (porting_cli.analysis.scan.checked): the prelude is left
    problem = syntax_problem(prelude) if prelude else None
    if problem is not None:  # pragma: no cover - no known edit gets here
        unfixed = [dataclasses.replace(f, fixable=False) for f in analysis.findings]
        return FixResult(text, [], unfixed, path, text)
    ctx = analysis.ctx
    companions = frozenset(node.lineno for key, (node, _) in ctx.companions.items() if key in ctx.edits)
    return FixResult(new_text, applied, remaining, path, text, companions)


def _joint(head: str, tail: str) -> str:
    """A newline when the line before the prelude has none (the file's last line)."""
    return "\n" if head and not tail and not head.endswith(("\n", "\r")) else ""


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
