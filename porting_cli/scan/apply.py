"""Applying the edits the rule families registered, as text splices.

Each edit replaces the text of one node. Edits nest (``torch.device("cuda", torch.cuda.
current_device())`` rewrites the inner call and then the outer one), so an edit reads its
node's parts through a ``View``, which gives their text with the edits inside them already
made, and the outermost edits are spliced into the original text; the rest of the file stays
byte for byte. porting_cli.fix builds the fixed file (prelude, checks) around this.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses

from .base import Context, Edit
from .engine import Analysis
from .nodes import SourceText


@dataclasses.dataclass(frozen=True)
class _Splice:
    key: tuple[int, int, int]  # (start, -end, 0 for a statement else 1): outer edits sort first
    node: ast.AST
    edit: Edit

    @property
    def start(self) -> int:
        return self.key[0]

    @property
    def end(self) -> int:
        return -self.key[1]


class View:
    """The text of the nodes under one edit, with the edits inside them made."""

    def __init__(self, rewriter: _Rewriter, splice: _Splice):
        self._rewriter = rewriter
        self._splice = splice

    def text(self, node: ast.AST) -> str:
        return self._rewriter.render(self._rewriter.key(node), inclusive=node is not self._splice.node)

    def between(self, start: int, end: int) -> str:
        """Text from offset ``start`` to ``end``, with the edits inside it made."""
        return self._rewriter.render((start, -end, -1), inclusive=True)

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self._rewriter.ctx.source.span(node)

    @property
    def source_text(self) -> SourceText:
        return self._rewriter.ctx.source


class _Rewriter:
    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.splices = sorted((_Splice(self.key(node), node, edit) for node, edit in ctx.edits.values()),
                              key=lambda s: s.key)
        self.keys = [s.key for s in self.splices]
        self.done: dict[int, str] = {}

    def key(self, node: ast.AST) -> tuple[int, int, int]:
        start, end = self.ctx.source.span(node)
        return start, -end, 0 if isinstance(node, ast.stmt) else 1

    def replacement(self, index: int) -> str:
        found = self.done.get(index)
        if found is None:
            splice = self.splices[index]
            found = self.done[index] = splice.edit(View(self, splice))
        return found

    def render(self, key: tuple[int, int, int], inclusive: bool) -> str:
        """The text of the span ``key`` with the edits inside it made (with the edit of the span
        itself when ``inclusive``)."""
        start, end = key[0], -key[1]
        text = self.ctx.source.text
        i = bisect.bisect_left(self.keys, key) if inclusive else bisect.bisect_right(self.keys, key)
        out, pos = [], start
        while i < len(self.splices):
            splice = self.splices[i]
            if splice.start >= end:
                break
            if splice.start >= pos and splice.end <= end:
                out.append(text[pos:splice.start])
                out.append(self.replacement(i))
                pos = splice.end
            i += 1
        out.append(text[pos:end])
        return "".join(out)


def apply_edits(analysis: Analysis) -> tuple[str, set[str]]:
    """The fixed text (without the prelude) and the prelude parts it needs."""
    ctx = analysis.ctx
    rewriter = _Rewriter(ctx)
    body = rewriter.render((0, -len(ctx.source.text), -1), inclusive=True)
    for index in range(len(rewriter.splices)):  # an edit inside a replaced node still asks for its prelude
        rewriter.replacement(index)
    bom = analysis.text[:len(analysis.text) - len(analysis.text.removeprefix("\ufeff"))]
    return bom + body, ctx.prelude
