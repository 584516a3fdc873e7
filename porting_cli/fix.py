"""Codemods that make a script device-agnostic.

``fix_source`` applies the edits that the static rules (``porting_cli.scan``)
register for their fixable findings and keeps the rest of the file byte for
byte. Fixes that need the device bind it once, after the module's imports::

    DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")

(``ACCEL_DEVICE`` if the script already uses the name ``DEVICE``), so the
fixed script runs on CUDA, on any other accelerator, and on a CPU-only machine.
Some fixes need more of the prelude (``PRELUDE``): the device type that CUDA
tests compare with, and two small helper functions. Each part follows a
``# neuron-check:`` comment, which is how a later scan recognises it.

Speed: the edits are made on the scan's own reduced tree (only the statements
that can hold a finding are parsed by libcst) and spliced into the original text
at the edited nodes' positions; a splice whose original code does not match the
text falls back to transforming the whole file.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import shutil
from pathlib import Path

import libcst as cst

from porting_cli.scan.base import prelude_names
from porting_cli.scan.engine import Analysis, analyze, analyze_cached, read_source, split_lines
from porting_cli.scan.model import Finding
from porting_cli.scan.rules import DEVICE_EXPR

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

    @property
    def changed(self) -> bool:
        return self.new_text != self.old_text

    def diff(self) -> str:
        return unified_diff(self.path, self.old_text, self.new_text)


class _ApplyEdits(cst.CSTTransformer):
    """Applies the registered edits bottom-up; remembers each edited node's replacement."""

    def __init__(self, edits):
        super().__init__()
        self.edits = edits
        self.replaced: list[tuple[cst.CSTNode, cst.CSTNode]] = []

    def on_leave(self, original_node, updated_node):
        entry = self.edits.get(id(original_node))
        if entry is not None and entry[0] is original_node:
            new = entry[1](updated_node)
            self.replaced.append((original_node, new))
            return new
        return updated_node


class _SpliceMismatch(Exception):
    """An edited node's code is not the text at its position (fall back to the full tree)."""


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


def _splice(analysis: Analysis, module: cst.Module, replaced) -> list[tuple[int, int, str]]:
    """(start offset, end offset, new text) in the file for each outermost edit."""
    ctx = analysis.ctx
    lines = ctx.lines
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    bare = module.with_changes(header=[], footer=[])
    spans = []
    for original, new in replaced:
        pos = ctx.positions[original]
        first, last = ctx.file_line(pos.start.line), ctx.file_line(pos.end.line)
        if isinstance(original, cst.SimpleStatementLine):  # whole lines, indentation re-added
            indent = lines[first - 1][:pos.start.column]
            if indent.strip():
                raise _SpliceMismatch
            old = "".join(lines[first - 1:last])

            def render(node, indent=indent):
                code = bare.with_changes(body=[node.with_changes(leading_lines=())]).code
                return "".join(indent + ln if ln.strip() else ln for ln in split_lines(code))
            if render(original) != old:
                raise _SpliceMismatch
            spans.append((starts[first - 1], starts[last], render(new)))
        else:
            start = starts[first - 1] + pos.start.column
            end = starts[last - 1] + pos.end.column
            if module.code_for_node(original) != "".join(lines)[start:end]:
                raise _SpliceMismatch
            spans.append((start, end, module.code_for_node(new)))
    spans.sort(key=lambda s: (s[0], -s[1]))
    outer: list[tuple[int, int, str]] = []
    for span in spans:  # an edit inside another edited node is already part of the outer one
        if outer and span[0] < outer[-1][1]:
            continue
        outer.append(span)
    return outer


def _apply(analysis: Analysis) -> tuple[str, set[str]]:
    """The fixed text (without the prelude) and the prelude parts it needs."""
    ctx = analysis.ctx
    body = analysis.text.removeprefix("\ufeff")
    bom = analysis.text[:len(analysis.text) - len(body)]
    edits = _ApplyEdits(ctx.edits)
    analysis.module.visit(edits)
    try:
        spans = _splice(analysis, analysis.module, edits.replaced)
    except _SpliceMismatch:
        full = analyze(analysis.text, ctx.path, reduce=False, device_name=ctx.device_name)
        again = _ApplyEdits(full.ctx.edits)
        new_module = full.module.visit(again)
        return new_module.code.removeprefix("\ufeff"), full.ctx.prelude | ctx.prelude
    out = body
    for start, end, new in reversed(spans):
        out = out[:start] + new + out[end:]
    return bom + out, ctx.prelude


def fix_source(text: str, path: str = "<string>") -> FixResult:
    """Apply every automatic fix to ``text``; raises ScanError on a syntax error."""
    analysis = analyze_cached(text, path)
    applied = [f for f in analysis.findings if f.fixable]
    remaining = [f for f in analysis.findings if not f.fixable]
    if not applied:
        return FixResult(text, [], remaining, path, text)
    fixed, parts = _apply(analysis)
    bom = "\ufeff" if fixed.startswith("\ufeff") else ""
    fixed = fixed.removeprefix("\ufeff")
    tree = ast.parse(fixed)  # a fix must never break the syntax
    lines = split_lines(fixed)
    at = _insertion_line(tree)
    prelude = _prelude_text(parts, analysis.ctx.device_name, _existing_prelude(analysis),
                            not _imports_torch(tree))
    new_text = bom + "".join(lines[:at]) + _joint(lines, at) + prelude + "".join(lines[at:])
    ast.parse(new_text.removeprefix("\ufeff"))
    return FixResult(new_text, applied, remaining, path, text)


def _joint(lines: list[str], index: int) -> str:
    """A newline when the line before the prelude has none (the file's last line)."""
    return "\n" if index > 0 and index == len(lines) and not lines[-1].endswith(("\n", "\r")) else ""


def unified_diff(path: str, old: str, new: str) -> str:
    """A ``diff -u`` style patch from ``old`` to ``new`` (empty when equal)."""
    def lines(text: str) -> list[str]:
        out = text.splitlines(keepends=True)
        if out and not out[-1].endswith(("\n", "\r")):
            out[-1] += "\n\\ No newline at end of file\n"
        return out
    return "".join(difflib.unified_diff(lines(old), lines(new), fromfile=f"a/{path}", tofile=f"b/{path}"))


def fix_file(path: str | Path, write: bool = True) -> FixResult:
    """Fix one file; with ``write`` the file is rewritten in place and the original
    kept as ``FILE.orig`` (an existing ``FILE.orig`` is left as it is)."""
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
