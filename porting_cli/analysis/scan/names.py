"""Names a fixed file uses before binding them, in the way pyflakes finds them.

A fix writes names (``DEVICE`` and the rest of the prelude, ``torch``, the helpers): each must
be bound before the first statement that runs it. ``unbound_names`` walks a module in order:
module-level and class-level code sees only the bindings made above it (a binding inside an
``if`` or ``try`` counts, as for pyflakes); a function body runs later, so it sees every
module-level binding and its own and its enclosing functions' names. ``new_unbound`` compares
a fixed text with its original and keeps the names the fix made unbound (the script's own
unbound names, a name from ``from x import *``, are not the fix's concern).
"""

from __future__ import annotations

import ast
import builtins
from collections import Counter

from .nodes import child_fields

_ALWAYS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__builtins__", "__spec__",
                                      "__loader__", "__package__", "__path__", "__annotations__",
                                      "__dict__", "__module__", "__qualname__", "__class__"}


_FUNCTION_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_MATCH_NAMES = tuple(getattr(ast, kind) for kind in ("MatchAs", "MatchStar") if hasattr(ast, kind))
_MATCH_MAPPING = getattr(ast, "MatchMapping", None)


def _children(item: ast.AST) -> list[ast.AST]:
    """ast.iter_child_nodes less the Load/Store/operator leaves (no name is in them), in order."""
    out = []
    for field in child_fields(type(item)):
        value = getattr(item, field)
        if type(value) is list:
            out.extend(v for v in value if isinstance(v, ast.AST))
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


def _targets(node: ast.AST) -> set[str]:
    """The names a binding statement or target binds (not descending into nested scopes)."""
    names: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is ast.Name:  # its only child is its context
            if type(item.ctx) is not ast.Load:  # Store or Del
                names.add(item.id)
            continue
        if kind in _FUNCTION_DEFS:
            names.add(item.name)
            continue
        if kind is ast.Lambda:
            continue
        if kind is ast.Import or kind is ast.ImportFrom:
            for alias in item.names:
                if alias.name != "*":
                    names.add(alias.asname or alias.name.split(".")[0])
        elif kind is ast.ExceptHandler:
            if item.name:
                names.add(item.name)
        elif kind is ast.Global or kind is ast.Nonlocal:
            names.update(item.names)
        elif kind is ast.NamedExpr:
            if type(item.target) is ast.Name:
                names.add(item.target.id)
        elif kind in _MATCH_NAMES:
            if item.name:
                names.add(item.name)
        elif kind is _MATCH_MAPPING and item.rest:
            names.add(item.rest)
        stack.extend(_children(item))
    return names


def _function_locals(func: ast.AST) -> set[str]:
    args = func.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    body = func.body if isinstance(func.body, list) else [func.body]
    for stmt in body:
        names |= _targets(stmt)
    return names


class _Walker:
    def __init__(self):
        self.unbound: list[tuple[str, int]] = []
        self.module_names: set[str] = set()
        self.deferred: list[tuple[ast.AST, tuple[frozenset[str], ...]]] = []

    # statements in order, in a scope whose bound names are ``bound`` (mutated as they run)
    def block(self, stmts: list[ast.stmt], bound: set[str], outer: tuple[frozenset[str], ...]) -> None:
        for stmt in stmts:
            self.statement(stmt, bound, outer)

    def statement(self, stmt: ast.stmt, bound: set[str], outer: tuple[frozenset[str], ...]) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for expr in [*stmt.decorator_list, *stmt.args.defaults,
                         *(d for d in stmt.args.kw_defaults if d is not None)]:
                self.expression(expr, bound, outer)
            self.deferred.append((stmt, (*outer, frozenset(bound))))
            bound.add(stmt.name)
        elif isinstance(stmt, ast.ClassDef):
            for expr in [*stmt.decorator_list, *stmt.bases, *(k.value for k in stmt.keywords)]:
                self.expression(expr, bound, outer)
            class_bound = set(bound)  # a class body sees the names above it, and its own
            self.block(stmt.body, class_bound, outer)
            bound.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal)):
            bound |= _targets(stmt)
        else:
            # the expressions of this statement, then its bindings, then its nested blocks
            blocks = {name: getattr(stmt, name) for name in ("body", "orelse", "finalbody", "handlers", "cases")
                      if isinstance(getattr(stmt, name, None), list)}
            for field, value in ast.iter_fields(stmt):
                if field in blocks or field in ("targets", "target"):
                    continue
                for expr in value if isinstance(value, list) else [value]:
                    if isinstance(expr, ast.AST) and not isinstance(expr, ast.withitem):
                        self.expression(expr, bound, outer)
                    elif isinstance(expr, ast.withitem):
                        self.expression(expr.context_expr, bound, outer)
                        if expr.optional_vars is not None:
                            bound |= _targets(expr.optional_vars)
            for field in ("targets", "target"):
                value = getattr(stmt, field, None)
                for target in value if isinstance(value, list) else [value] if value is not None else []:
                    if isinstance(stmt, ast.AugAssign) or not isinstance(target, ast.Name):
                        self.expression(target, bound, outer)  # `x[i] = ...`, `x += 1` read names
                    bound |= _targets(target)
            for name, block in blocks.items():
                if name == "handlers":
                    for handler in block:
                        if handler.type is not None:
                            self.expression(handler.type, bound, outer)
                        if handler.name:
                            bound.add(handler.name)
                        self.block(handler.body, bound, outer)
                elif name == "cases":
                    for case in block:
                        bound |= _targets(case.pattern)
                        if case.guard is not None:
                            self.expression(case.guard, bound, outer)
                        self.block(case.body, bound, outer)
                else:
                    self.block(block, bound, outer)

    def expression(self, node: ast.AST, bound: set[str], outer: tuple[frozenset[str], ...]) -> None:
        stack = [node]
        while stack:
            item = stack.pop()
            kind = type(item)
            if kind is ast.Name:  # its only child is its context
                if type(item.ctx) is ast.Load and item.id not in bound and item.id not in _ALWAYS \
                        and not any(item.id in s for s in outer):
                    self.unbound.append((item.id, item.lineno))
                continue
            if kind is ast.Lambda:
                for expr in [*item.args.defaults, *(d for d in item.args.kw_defaults if d is not None)]:
                    stack.append(expr)
                self.deferred.append((item, (*outer, frozenset(bound))))
                continue
            if kind in _COMPREHENSIONS:
                inner = set(bound)
                for gen in item.generators:
                    inner |= _targets(gen.target)
                inner |= _targets(item)
                stack.extend(gen.iter for gen in item.generators)
                for gen in item.generators:
                    for cond in gen.ifs:
                        self.expression(cond, inner, outer)
                for part in ("elt", "key", "value"):
                    if getattr(item, part, None) is not None:
                        self.expression(getattr(item, part), inner, outer)
                continue
            if kind is ast.NamedExpr and type(item.target) is ast.Name:
                bound.add(item.target.id)
            stack.extend(_children(item))

    def run(self, tree: ast.Module) -> list[tuple[str, int]]:
        bound: set[str] = set()
        self.block(tree.body, bound, ())
        module = frozenset(bound | {n for stmt in tree.body for n in _targets(stmt)})
        while self.deferred:
            func, outer = self.deferred.pop()
            # a function runs after the module has bound all its names
            scopes = (module, *outer[1:]) if outer else (module,)
            local = _function_locals(func)
            body = func.body if isinstance(func.body, list) else None
            if body is None:
                self.expression(func.body, set(local), scopes)
            else:
                self.block(body, set(local), scopes)
        return self.unbound


def _star_import(stmts: list[ast.stmt]) -> bool:
    """Whether module-level code (its if/try/with/loop blocks included) has `from x import *`:
    Python allows it nowhere else, so no function or class body is searched."""
    stack = list(stmts)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
            return True
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            stack.extend(getattr(stmt, field, None) or [])
        for part in getattr(stmt, "handlers", None) or getattr(stmt, "cases", None) or []:
            stack.extend(part.body)
    return False


def unbound_names(tree: ast.Module) -> list[tuple[str, int]]:
    """(name, line) of each use of a name not bound where it runs."""
    if _star_import(tree.body):
        return []  # a star import may bind anything
    return _Walker().run(tree)


def new_unbound(original: ast.Module | Counter, fixed: ast.Module) -> list[tuple[str, int]]:
    """The uses of names in ``fixed`` that the fix left unbound: names used unbound more often
    there than in ``original`` (a tree, or its `unbound_counts` when it is asked again)."""
    before = original if isinstance(original, Counter) else unbound_counts(original)
    after = unbound_names(fixed)
    counts = Counter(name for name, _ in after)
    worse = {name for name, count in counts.items() if count > before[name]}
    return [(name, line) for name, line in after if name in worse]


def unbound_counts(tree: ast.Module) -> Counter:
    """How often each name is used unbound in ``tree`` (new_unbound's baseline)."""
    return Counter(name for name, _ in unbound_names(tree))
