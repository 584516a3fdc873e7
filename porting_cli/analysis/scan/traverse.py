"""One walk of the ``ast`` tree that runs the handlers of every rule family.

Each node is seen once: the walk first records the structure the rules ask about (the call
whose callee a node is, the statements alone on their line, the operands of comparisons, the
outermost node of each name chain, which it resolves and hands to the reference families),
then calls the families' ``visit_<node type>`` handlers in family order, walks the children,
and calls the ``leave_<node type>`` handlers. Two handlers are not named after an ``ast``
type: ``visit_String`` gets each plain string literal (each piece of ``"a" "b"`` on its own,
none of an f-string's text), ``visit_Decorator`` each decorator expression.

Statements that touch none of ``candidates`` (line numbers) are skipped whole: no rule can
fire in them (see porting_cli/analysis/scan/engine.py).
"""

from __future__ import annotations

import ast
import bisect
import functools
from typing import Callable, Iterable

from .base import Context, FamilyVisitor, ReferenceFamily
from .net import prose_strings
from .nodes import LEAF_FIELDS, chain_qualname, child_fields


class Piece(ast.Constant):
    """One literal of an implicit concatenation; ``span`` is its offsets in the text."""

    _attributes = ()

    def __init__(self, value: str, span: tuple[int, int]):
        super().__init__(value=value)
        self.span = span


@functools.lru_cache(maxsize=None)
def _handler_names(cls: type, prefix: str) -> tuple[str, ...]:
    return tuple(name for name in dir(cls) if name.startswith(prefix))


def _handlers(families: Iterable[FamilyVisitor], prefix: str) -> dict[str, tuple[Callable, ...]]:
    table: dict[str, list[Callable]] = {}
    for family in families:
        for name in _handler_names(type(family), prefix):
            table.setdefault(name[len(prefix):], []).append(getattr(family, name))
    return {k: tuple(v) for k, v in table.items()}


def _leaf_names(kinds) -> set[str]:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    return {sub.__name__ for kind in kinds for sub in kind.__subclasses__()}


class Traversal:
    def __init__(self, ctx: Context, families: list[FamilyVisitor], candidates: list[int] | None = None):
        self.ctx = ctx
        self.candidates = candidates
        self.referrers = tuple(f.on_reference for f in families if isinstance(f, ReferenceFamily))
        self.visit = _handlers(families, "visit_")
        self.leave = _handlers(families, "leave_")
        self.strings = self.visit.get("String", ())
        self.decorators = self.visit.get("Decorator", ())
        self.prose: set[int] = set()  # ids of string constants that are messages
        # with no handler for them, visiting the Load/Store/operator leaves does nothing
        handled = set(self.visit) | set(self.leave)
        self.skipped = frozenset(field for field, kinds in LEAF_FIELDS.items() if not handled & _leaf_names(kinds))
        self.plans: dict[type, tuple] = {}

    def run(self, tree: ast.Module) -> None:
        self._body(tree.body)

    def _touches(self, stmt: ast.stmt) -> bool:
        decorators = getattr(stmt, "decorator_list", None)
        first = min(d.lineno for d in decorators) if decorators else stmt.lineno
        i = bisect.bisect_left(self.candidates, first)
        return i < len(self.candidates) and self.candidates[i] <= (stmt.end_lineno or first)

    def _body(self, body: list[ast.stmt]) -> None:
        ctx = self.ctx
        for i, stmt in enumerate(body):
            if self.candidates is not None and not self._touches(stmt):
                continue
            kind = type(stmt)
            if kind is ast.Expr or kind is ast.Assign:
                shares = i + 1 < len(body) and body[i + 1].lineno == stmt.end_lineno
                if not shares and self._alone(stmt):
                    if kind is ast.Expr and type(stmt.value) is ast.Call:
                        ctx.sole_call_stmt[id(stmt.value)] = stmt
                    elif kind is ast.Assign and len(stmt.targets) == 1:
                        ctx.sole_assign[id(stmt.targets[0])] = stmt
            self._node(stmt)

    def _alone(self, stmt: ast.stmt) -> bool:
        """Nothing but space before the statement on its first line, and nothing but a
        semicolon or a comment after it on its last (no backslash going on)."""
        lines = self.ctx.lines
        if lines[stmt.lineno - 1][:stmt.col_offset].strip():
            return False
        last = lines[stmt.end_lineno - 1]
        rest = last[self.ctx.source.column(stmt.end_lineno, stmt.end_col_offset):].strip()
        if rest.startswith(";"):
            rest = rest[1:].lstrip()
        return not rest or rest.startswith("#")

    def _node(self, node: ast.AST) -> None:
        kind = type(node)
        ctx = self.ctx
        if kind is ast.Attribute or kind is ast.Name:
            self._reference(node)
        elif kind is ast.Call:
            ctx.call_of[id(node.func)] = node
            self._prose(node)
        elif kind is ast.Raise or kind is ast.Assert:
            self._prose(node)
        elif kind is ast.Compare:
            ctx.compared.add(id(node.left))
            ctx.compared.update(map(id, node.comparators))
        elif kind is ast.Constant:
            if self.strings and isinstance(node.value, str):
                self._string(node)
            return
        elif kind is ast.JoinedStr:  # its text is no string literal; its expressions are code
            ctx.fstrings.append(node)
            for value in node.values:
                if type(value) is ast.FormattedValue:
                    self._node(value)
            return
        visits, leaves, fields = self.plans.get(kind) or self._plan(kind)
        for fn in visits:
            fn(node)
        if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.ClassDef:
            for decorator in node.decorator_list:
                for fn in self.decorators:
                    fn(decorator)
        for field in fields:
            value = getattr(node, field)
            if type(value) is list:
                if value and isinstance(value[0], ast.stmt):
                    self._body(value)
                else:
                    for item in value:
                        if isinstance(item, ast.AST):
                            self._node(item)
            elif isinstance(value, ast.AST):
                self._node(value)
        for fn in leaves:
            fn(node)

    def _plan(self, kind: type) -> tuple[tuple[Callable, ...], tuple[Callable, ...], tuple[str, ...]]:
        """What the walk does at a node of type ``kind``: its visit and leave handlers and the
        fields it walks, looked up once per type (a file has a million nodes of a few dozen)."""
        name = kind.__name__
        plan = self.plans[kind] = (self.visit.get(name, ()), self.leave.get(name, ()), child_fields(kind, self.skipped))
        return plan

    def _reference(self, node: ast.Name | ast.Attribute) -> None:
        ctx = self.ctx
        if id(node) in ctx.inner:
            return
        if type(node) is ast.Name:
            qn = ctx.aliases.get(node.id, node.id)
            if qn == node.id or type(node.ctx) is not ast.Load:  # only a read of an alias uses the API
                return
        else:
            parts = []
            inner = node
            while type(inner) is ast.Attribute:  # inner parts are not references of their own
                parts.append(inner.attr)
                inner = inner.value
                ctx.inner.add(id(inner))
            qn = chain_qualname(inner, parts, ctx.aliases)  # one walk of the chain for both
            if not qn:
                return
            if type(node.ctx) is not ast.Load and type(node.value) is ast.Name \
                    and f"{node.value.id}.{node.attr}" in ctx.value_aliases:
                return  # `self.autocast = torch.cuda.amp.autocast` binds the name, it does not use it
        for on_reference in self.referrers:
            on_reference(node, qn)

    def _prose(self, node: ast.AST) -> None:
        """Strings in messages (print, logging, help=, raise, assert) are prose, never values."""
        for part in prose_strings(node):
            for inner in ast.walk(part):
                if type(inner) is ast.Constant:
                    self.prose.add(id(inner))

    def _string(self, node: ast.Constant) -> None:
        if id(node) in self.prose:
            return
        strings = self.ctx.strings
        if strings.value(node) is not None:
            for fn in self.strings:
                fn(node)
            return
        for value, start, end in strings.pieces(node):
            piece = Piece(value, (start, end))
            for fn in self.strings:
                fn(piece)
