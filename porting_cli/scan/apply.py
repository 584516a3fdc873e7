"""Applying the edits the rule families registered, on the scan's own libcst tree.

The edits are made on the reduced tree (only the statements that can hold a finding are
parsed by libcst) and spliced into the original text at the edited nodes' positions; a
splice whose original code does not match the text falls back to transforming the whole
file. porting_cli.fix builds the fixed file (prelude, checks) around this.
"""

from __future__ import annotations

import libcst as cst

from .engine import Analysis, analyze
from .source import split_lines


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


def apply_edits(analysis: Analysis) -> tuple[str, set[str]]:
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
