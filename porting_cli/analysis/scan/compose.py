"""The fixed file as ``--fix`` writes it: the edits (porting_cli.analysis.scan.apply) and the
prelude they need, placed after the file's leading imports and its first module-level torch
import (porting_cli.analysis.fix documents the prelude). porting_cli.analysis.scan.bound checks
its names; porting_cli.analysis.fix writes it.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import TYPE_CHECKING

from .rules import DEVICE_EXPR, prelude_names

if TYPE_CHECKING:
    from .engine import Analysis

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


def _imports_torch_module(stmt: ast.stmt) -> bool:
    """``stmt`` imports torch (``import torch``, ``import torch as th``, ``from torch import nn``),
    itself or in the body of a top-level ``try``."""
    if isinstance(stmt, ast.Try):
        return any(_imports_torch_module(inner) for inner in stmt.body)
    if isinstance(stmt, ast.Import):
        return any(alias.name.split(".")[0] == "torch" for alias in stmt.names)
    return isinstance(stmt, ast.ImportFrom) and not stmt.level and (stmt.module or "").split(".")[0] == "torch"


def _binds_torch(stmt: ast.stmt) -> bool:
    """``stmt`` binds the name ``torch`` to the module (``import torch``, ``import torch.nn``)."""
    if isinstance(stmt, ast.Try):
        return any(_binds_torch(inner) for inner in stmt.body)
    return isinstance(stmt, ast.Import) and any(
        (alias.asname is None and alias.name.split(".")[0] == "torch") or alias.asname == "torch" == alias.name
        for alias in stmt.names)


def _sets_environment(tree: ast.Module) -> bool:
    """Module-level code (not in a function) writes an environment variable: torch may read it
    when it is imported, so the prelude must not import torch above it."""
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and _is_environ(node.value):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr == "putenv" or (node.func.attr in ("setdefault", "update")
                                               and _is_environ(node.func.value))):
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ")


NO_SAFE_PLACE = ("the file imports torch only inside a block, after setting environment variables, so "
                 "the device prelude has no safe place above it; bind the device after `import torch`")


@dataclasses.dataclass
class Composed:
    """A fixed file and where its parts are: ``statements`` holds (first, last line in ``text``,
    index of the original top-level statement), ``prelude_lines`` the prelude's first and last line
    (0, 0 without one). ``withdrawn`` says why the prelude has no safe place (then ``text`` is None)."""

    text: str | None
    prelude: str = ""
    statements: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)
    prelude_lines: tuple[int, int] = (0, 0)
    replacements: dict[int, str] = dataclasses.field(default_factory=dict)  # edit key -> its code
    withdrawn: str | None = None


def _placement(tree: ast.Module, needs_prelude: bool) -> tuple[int | None, bool]:
    """(0-based line before which the prelude goes, or None where there is no safe place;
    whether torch is bound above it). After the leading imports, and after the file's first
    module-level torch import (a script that sets CUDA_VISIBLE_DEVICES and then imports torch)."""
    at = _insertion_line(tree)
    first = next((stmt for stmt in tree.body if _imports_torch_module(stmt)), None)
    if first is not None:
        at = max(at, first.end_lineno or first.lineno)
    elif needs_prelude and _sets_environment(tree):
        return None, False
    bound = any(_binds_torch(stmt) for stmt in tree.body if (stmt.end_lineno or stmt.lineno) <= at)
    return at, bound


def compose(analysis: Analysis, force_torch: bool = False) -> Composed:
    """The fixed text of ``analysis`` (its edits and the prelude they need), with the map of its parts."""
    from .apply import _Rewriter, _top_level_spans

    ctx = analysis.ctx
    ctx.prelude.clear()  # filled again by the edits made here (a dropped edit needs none)
    rewriter = _Rewriter(ctx)
    index_of = {id(splice.node): i for i, splice in enumerate(rewriter.splices)}
    replacements = {key: rewriter.replacement(index_of[id(node)]) for key, (node, _) in ctx.edits.items()
                    if id(node) in index_of}
    at, torch_bound = _placement(analysis.tree, bool(ctx.prelude))
    if at is None:
        return Composed(None, replacements=replacements, withdrawn=NO_SAFE_PLACE)
    text = ctx.source.text
    cut = ctx.source.starts[at]
    spans = _top_level_spans(ctx)
    bounds = sorted({0, len(text), cut, *(s for s, _ in spans), *(e for _, e in spans)})
    starts = {start: i for i, (start, _) in enumerate(spans)}
    prelude = _prelude_text(ctx.prelude, ctx.device_name, _existing_prelude(analysis),
                            (bool(ctx.prelude) or force_torch) and not torch_bound)
    out: list[str] = []
    statements: list[tuple[int, int, int]] = []
    prelude_lines = (0, 0)
    line = 1
    span_index = None
    for a, b in zip(bounds, bounds[1:]):
        if a == cut and prelude:
            out.append(prelude)
            prelude_lines = (line, line + prelude.count("\n") - 1)
            line += prelude.count("\n")
        if a in starts:
            span_index = starts[a]
        piece = rewriter.render(a, b)
        inside = span_index is not None and b <= spans[span_index][1]
        if inside:
            statements.append((line, line + max(piece.count("\n") - 1, 0), span_index))
        else:
            span_index = None
        out.append(piece)
        line += piece.count("\n")
    if cut == len(text) and prelude:
        out.append(_joint("".join(out), ""))
        out.append(prelude)
        prelude_lines = (line, line + prelude.count("\n") - 1)
    bom = analysis.text[:len(analysis.text) - len(analysis.text.removeprefix("\ufeff"))]
    return Composed(bom + "".join(out), prelude, statements, prelude_lines, replacements)


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


def _joint(head: str, tail: str) -> str:
    """A newline when the line before the prelude has none (the file's last line)."""
    return "\n" if head and not tail and not head.endswith(("\n", "\r")) else ""


