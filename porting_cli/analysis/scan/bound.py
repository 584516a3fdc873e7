"""A fix never uses a name before it is bound.

The fixes write names: the prelude's ``DEVICE`` and helpers, ``torch``. The fixed file is
composed as ``--fix`` writes it (porting_cli.analysis.scan.compose: the prelude after the file's
first module-level torch import) and its names are checked the way pyflakes checks them
(porting_cli.analysis.scan.names). A name the fix made unbound drops the edits that wrote it,
in the top-level statement that uses it, and their findings stay, not fixable, with the reason;
``torch`` unbound (a file that imports it as ``th``, or only inside a block) first makes the
prelude add ``import torch``. Where the prelude has no safe place (the file imports torch only
in a block that sets environment variables first) the edits that need it are withdrawn.
"""

from __future__ import annotations

import ast
import dataclasses
import re

from .engine import Analysis
from .names import new_unbound, unbound_counts
from .rules import prelude_names


def _uses(code: str, names: set[str]) -> bool:
    return any(re.search(rf"(?<![\w.]){re.escape(name)}\b", code) for name in names)


def drop_unbound_fixes(analysis: Analysis) -> None:
    """Drop the edits whose names the fixed file uses unbound, and mark their findings."""
    from .compose import compose
    ctx = analysis.ctx
    if ctx is None or not ctx.edits:
        return
    prelude = set(prelude_names(ctx.device_name).values())
    why: dict[int, str] = {}
    force_torch = False
    before = None  # the original's unbound names, counted once for every round
    for _ in range(len(ctx.edits) + 2):
        if not ctx.edits:
            break
        composed = compose(analysis, force_torch)
        if composed.withdrawn is not None:
            keys = [key for key, code in composed.replacements.items() if _uses(code, prelude)]
            for key in keys or list(ctx.edits):
                why[key] = composed.withdrawn
                del ctx.edits[key]
            continue
        try:
            fixed_tree = ast.parse(composed.text)
        except (SyntaxError, ValueError):  # the syntax check's concern (porting_cli.analysis.scan.checked)
            break
        before = unbound_counts(analysis.tree) if before is None else before
        problems = new_unbound(before, fixed_tree)
        if not problems:
            break
        if not force_torch and any(name == "torch" for name, _ in problems):
            force_torch = True
            continue
        name, line = problems[0]
        first, last = composed.prelude_lines
        reason = f"the fix would use `{name}` before it is bound (line {line} of the fixed file)"
        if first <= line <= last:
            keys = [key for key, code in composed.replacements.items() if _uses(code, prelude)]
        else:
            index = next((i for a, b, i in composed.statements if a <= line <= b), None)
            keys = _keys_in(analysis, index)
            keys = [key for key in keys if _uses(composed.replacements.get(key, ""), {name})] or keys
        if not keys:  # pragma: no cover - a new unbound name comes from an edit
            break
        for key in keys:
            why[key] = reason
            del ctx.edits[key]
    analysis.force_torch = force_torch
    if why:
        mark_unfixable(analysis, why)
        compose(analysis, force_torch)  # the prelude parts of the edits that stay


def _keys_in(analysis: Analysis, index: int | None) -> list[int]:
    """The edits in top-level statement ``index``."""
    if index is None:
        return []
    from .apply import _top_level_spans

    ctx = analysis.ctx
    start, end = _top_level_spans(ctx)[index]
    return [key for key, (node, _) in ctx.edits.items() if start <= ctx.source.outer_span(node)[0] < end]


def mark_unfixable(analysis: Analysis, why_dropped: dict[int, str]) -> None:
    """Mark the findings of the dropped edits (edit key -> why) not fixable, with the reason."""
    ctx = analysis.ctx
    replaced = {}
    for key, problem in why_dropped.items():
        finding = ctx.edit_owner.get(key)
        if finding is not None and id(finding) not in replaced:
            replaced[id(finding)] = dataclasses.replace(
                finding, fixable=False, message=f"{finding.message} (not fixed automatically: {problem})")
    analysis.findings[:] = [replaced.get(id(f), f) for f in analysis.findings]
