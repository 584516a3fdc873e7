"""Codemods that make a script device-agnostic.

``fix_source`` applies the edits that the static rules (``porting_cli.scan``)
register for their fixable findings, in one libcst transformation that keeps
the rest of the file byte for byte. Fixes that need the device bind it once,
after the module's imports::

    DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")

(``ACCEL_DEVICE`` if the script already uses the name ``DEVICE``), so the
fixed script runs on CUDA, on any other accelerator, and on a CPU-only machine.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import shutil
from pathlib import Path

import libcst as cst

from porting_cli.scan.engine import analyze, read_source
from porting_cli.scan.model import Finding
from porting_cli.scan.rules import DEVICE_EXPR

DEVICE_COMMENT = "# neuron-check: the current accelerator, or the CPU where there is none"


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
    def __init__(self, edits):
        super().__init__()
        self.edits = edits

    def on_leave(self, original_node, updated_node):
        entry = self.edits.get(id(original_node))
        if entry is not None and entry[0] is original_node:
            return entry[1](updated_node)
        return updated_node


def _bound_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def _device_name(tree: ast.Module) -> str:
    names = _bound_names(tree)
    for candidate in ("DEVICE", "ACCEL_DEVICE", "NEURON_CHECK_DEVICE"):
        if candidate not in names:
            return candidate
    n = 2
    while f"ACCEL_DEVICE_{n}" in names:
        n += 1
    return f"ACCEL_DEVICE_{n}"


def _is_import(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _imports_torch(module: cst.Module) -> bool:
    for stmt in module.body:
        if _is_import(stmt):
            for imp in stmt.body:
                if isinstance(imp, cst.Import):
                    for alias in imp.names:
                        name = cst.Module([]).code_for_node(alias.name)
                        if alias.asname is None and name.split(".")[0] == "torch":
                            return True
                        if alias.asname is not None and name == "torch" and \
                                alias.asname.name.value == "torch":
                            return True
    return False


def _add_prelude(module: cst.Module, device_name: str | None, need_torch: bool) -> cst.Module:
    """Insert ``import torch`` and the device binding after the leading imports."""
    body = list(module.body)
    index = 0
    for i, stmt in enumerate(body):
        if _is_import(stmt):
            index = i + 1
        elif not (i == 0 and _is_docstring(stmt)):
            break
    new: list[cst.BaseStatement] = []
    if need_torch and not _imports_torch(module):
        new.append(cst.parse_statement("import torch\n"))
    if device_name:
        stmt = cst.parse_statement(f"{device_name} = {DEVICE_EXPR}\n")
        new.append(stmt.with_changes(leading_lines=[cst.EmptyLine(),
                                                    cst.EmptyLine(comment=cst.Comment(DEVICE_COMMENT))]))
    return module.with_changes(body=body[:index] + new + body[index:])


def fix_source(text: str, path: str = "<string>") -> FixResult:
    """Apply every automatic fix to ``text``; raises ScanError on a syntax error."""
    tree = analyze(text, path, reduce=False, device_name="DEVICE").tree  # parse once for names
    analysis = analyze(text, path, reduce=False, device_name=_device_name(tree))
    applied = [f for f in analysis.findings if f.fixable]
    remaining = [f for f in analysis.findings if not f.fixable]
    if not applied:
        return FixResult(text, [], remaining, path, text)
    ctx = analysis.ctx
    new_module = analysis.module.visit(_ApplyEdits(ctx.edits))
    new_module = _add_prelude(new_module, ctx.device_name if ctx.needs_device else None, True)
    new_text = new_module.code
    ast.parse(new_text.removeprefix("\ufeff"))  # a fix must never break the syntax
    return FixResult(new_text, applied, remaining, path, text)


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
