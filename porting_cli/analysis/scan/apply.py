"""Applying the edits the rule families registered, as text splices.

Each edit replaces the text of one node. Edits nest (``torch.device("cuda", torch.cuda.
current_device())`` rewrites the inner call and then the outer one), so an edit reads its
node's parts through a ``View``, which gives their text with the edits inside them already
made, and the outermost edits are spliced into the original text; the rest of the file stays
byte for byte. porting_cli.analysis.fix builds the fixed file (prelude, checks) around this.
"""

from __future__ import annotations

import ast
import bisect
from typing import NamedTuple

from .base import Context, Edit
from .engine import Analysis
from .nodes import STRING_START, SourceText, literal_end


class _Splice:
    """One edit at its place: ``key`` is (start, -end, 0 for a statement else 1), so that outer
    edits sort before the edits inside them."""

    __slots__ = ("key", "start", "end", "node", "edit")

    def __init__(self, key: tuple[int, int, int], node: ast.AST, edit: Edit):
        self.key, self.node, self.edit = key, node, edit
        self.start, self.end = key[0], -key[1]


class View:
    """The text of the nodes under one edit, with the edits inside them made.

    An edit replaces its node with the parentheses that group it (``(x)``), as the node's
    text includes them; ``keep_parens`` puts them back around code that only changes the
    node (a renamed callee), ``span`` is the node without them.
    """

    def __init__(self, rewriter: _Rewriter, splice: _Splice):
        self._rewriter = rewriter
        self._splice = splice

    def text(self, node: ast.AST) -> str:
        start, end = self.outer(node)
        return self.between(start, end)

    def between(self, start: int, end: int) -> str:
        """Text from offset ``start`` to ``end``, with the edits inside it made."""
        return self._rewriter.render(start, end, exclude=self._splice)

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self._rewriter.ctx.source.span(node)

    def outer(self, node: ast.AST) -> tuple[int, int]:
        return self._rewriter.ctx.source.outer_span(node)

    def keep_parens(self, node: ast.AST, code: str) -> str:
        start, end = self.span(node)
        outer_start, outer_end = self.outer(node)
        text = self.source_text.text
        return text[outer_start:start] + code + text[end:outer_end]

    @property
    def source_text(self) -> SourceText:
        return self._rewriter.ctx.source


class _Rewriter:
    def __init__(self, ctx: Context, leave_out: frozenset[int] = frozenset()):
        """``leave_out``: ids of edited nodes whose edit is not made."""
        self.ctx = ctx
        self.splices = sorted((_Splice(self.key(node), node, edit) for key, (node, edit) in ctx.edits.items()
                               if key not in leave_out), key=lambda s: s.key)
        self.keys = [s.key for s in self.splices]
        self.done: dict[int, str] = {}
        self._fstring_quotes: list[tuple[int, int, str]] | None = None

    def key(self, node: ast.AST) -> tuple[int, int, int]:
        start, end = self.ctx.source.outer_span(node)
        return start, -end, 0 if isinstance(node, ast.stmt) else 1

    def replacement(self, index: int) -> str:
        found = self.done.get(index)
        if found is None:
            splice = self.splices[index]
            found = splice.edit(View(self, splice))
            avoid = self.quotes_around(splice.start, splice.end)
            if avoid:
                found = requoted(found, avoid)
            self.done[index] = found
        return found

    def quotes_around(self, start: int, end: int) -> set[str]:
        """The quote characters of the single-quoted f-strings around offsets start..end: code
        put there must not use them before Python 3.12."""
        if self._fstring_quotes is None:
            source = self.ctx.source
            self._fstring_quotes = []
            for node in self.ctx.fstrings:
                f_start, f_end = source.span(node)
                head = source.text[f_start:f_start + 6].lstrip("rRbBuUfF")
                if head[:1] in ("'", '"') and not head.startswith(head[0] * 3):
                    self._fstring_quotes.append((f_start, f_end, head[0]))
        return {q for f_start, f_end, q in self._fstring_quotes if f_start < start and end <= f_end}

    def render(self, start: int, end: int, exclude: _Splice | None = None) -> str:
        """The text from ``start`` to ``end`` with the edits inside it made (but ``exclude``,
        the edit asking)."""
        text = self.ctx.source.text
        i = bisect.bisect_left(self.keys, (start, -end, -1))
        out, pos = [], start
        while i < len(self.splices):
            splice = self.splices[i]
            if splice.start >= end:
                break
            if splice.start >= pos and splice.end <= end and splice is not exclude:
                out.append(text[pos:splice.start])
                out.append(self.replacement(i))
                pos = splice.end
            i += 1
        out.append(text[pos:end])
        return "".join(out)


def requoted(code: str, avoid: set[str]) -> str:
    """``code`` with its string literals quoted with a quote not in ``avoid`` (code that goes
    inside an f-string: ``f"{device_memory('memory_reserved', 0)}"``); a literal that cannot be
    requoted stays, and the syntax check drops the fix."""
    other = next((q for q in ("'", '"') if q not in avoid), None)
    if other is None:
        return code
    out, i = [], 0
    while i < len(code):
        m = STRING_START.match(code, i)
        if m is None or (i and (code[i - 1].isalnum() or code[i - 1] == "_")):
            out.append(code[i])
            i += 1
            continue
        end = literal_end(code, i)
        if end < 0:
            return code
        token = code[i:end]
        quote = m.group(1)
        prefix = token[:m.end() - i - len(quote)]
        body = token[len(prefix) + len(quote):len(token) - len(quote)]
        if quote in avoid and len(quote) == 1 and other not in body and "\\" not in body:
            token = prefix + other + body + other
        out.append(token)
        i = end
    return "".join(out)


class FixedText(NamedTuple):
    """The fixed text (without the prelude and the byte-order mark) in two parts, before and
    after the offset it was cut at, and what the fix needs besides."""

    head: str
    tail: str
    prelude: set[str]         # the prelude parts the edits use


def _top_level_spans(ctx: Context) -> list[tuple[int, int]]:
    """Offsets of the whole lines of each top-level statement (those sharing a line together)."""
    source = ctx.source
    ranges: list[list[int]] = []
    for stmt in ctx.tree.body:
        decorators = getattr(stmt, "decorator_list", None)
        first = min(d.lineno for d in decorators) if decorators else stmt.lineno
        last = stmt.end_lineno or stmt.lineno
        if ranges and first <= ranges[-1][1]:
            ranges[-1][1] = max(ranges[-1][1], last)
        else:
            ranges.append([first, last])
    return [(source.starts[first - 1], source.starts[min(last, len(source.lines))]) for first, last in ranges]


def apply_edits(analysis: Analysis, cut: int = 0) -> FixedText:
    """Make every edit; ``cut`` is an offset of the original text at a statement boundary."""
    ctx = analysis.ctx
    ctx.prelude.clear()  # filled again by the edits made here (a dropped edit needs none)
    rewriter = _Rewriter(ctx)
    head = rewriter.render(0, cut)
    tail = rewriter.render(cut, len(ctx.source.text))
    for index in range(len(rewriter.splices)):  # an edit inside a replaced node still asks for its prelude
        rewriter.replacement(index)
    return FixedText(head, tail, ctx.prelude)
