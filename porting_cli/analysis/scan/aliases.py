"""Names bound to torch APIs by code, not only by imports.

``collect_imports`` maps ``import torch as th`` and ``from torch import autocast as ac``. Scripts
also bind the APIs to names of their own, and the rules must see through those too::

    precision_scope = autocast if opt.precision == "autocast" else nullcontext
    amp_ctx = functools.partial(torch.autocast, dtype=torch.bfloat16)   # or funcy.partial, toolz.partial
    def scope(ctx=torch.cuda.amp.autocast): ...
    def get_scaler():
        return torch.cuda.amp.GradScaler

A name is an alias of the API when every binding of it in the file (assignments, a parameter's
default, the return of a small local function) resolves to that API or to a name that is no
torch API (the other branch of a conditional expression); scopes are ignored, as for imports.
"""

from __future__ import annotations

import ast

from .nodes import module_statements, qualname

#: `functools.partial` and its look-alikes in other libraries (`funcy.partial`, `toolz.partial`)
PARTIAL_NAME = "partial"
ROOTS = ("torch",)
SMALL_FUNCTION = 6  # statements: a helper that hands back an API, not real code


def _api(node: ast.AST, aliases: dict[str, str], returns: dict[str, str]) -> str | None:
    """The torch API ``node`` evaluates to, if any."""
    kind = type(node)
    if kind is ast.Name or kind is ast.Attribute:
        head = node
        while type(head) is ast.Attribute:
            head = head.value
        if type(head) is not ast.Name or head.id not in aliases:
            return None
        name = qualname(node, aliases)
        return name if name and name.split(".")[0] in ROOTS else None
    if kind is ast.IfExp:
        return _api(node.body, aliases, returns) or _api(node.orelse, aliases, returns)
    if kind is ast.Call:
        if node.args and (qualname(node.func, aliases) or "").rpartition(".")[2] == PARTIAL_NAME:
            return _api(node.args[0], aliases, returns)
        if type(node.func) is ast.Name and not node.args and not node.keywords:
            return returns.get(node.func.id)  # scaler_class = get_scaler_class()
    return None


def value_aliases(tree: ast.Module, aliases: dict[str, str]) -> dict[str, str]:
    """Name -> the torch API it is bound to by assignments, defaults and small helpers."""
    bound: dict[str, set[str | None]] = {}
    returns: dict[str, str] = {}
    assigned: list[tuple[str, ast.AST]] = []
    for stmt in module_statements(tree):  # statements only: walking every expression costs
        kind = type(stmt)
        if kind is ast.Assign:
            assigned += [(t.id, stmt.value) for t in stmt.targets if type(t) is ast.Name]
            assigned += [(f"{t.value.id}.{t.attr}", stmt.value) for t in stmt.targets
                         if type(t) is ast.Attribute and type(t.value) is ast.Name]  # self.autocast = ...
        elif kind is ast.AnnAssign and type(stmt.target) is ast.Name and stmt.value is not None:
            assigned.append((stmt.target.id, stmt.value))
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            args = stmt.args
            positional = [*args.posonlyargs, *args.args]
            for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
                assigned.append((arg.arg, default))
            assigned += [(a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            if len(stmt.body) <= SMALL_FUNCTION:
                values = [r.value for r in stmt.body if type(r) is ast.Return and r.value is not None]
                api = _api(values[0], aliases, {}) if len(values) == 1 else None
                if api is not None:
                    returns[stmt.name] = api
    for name, value in assigned:
        bound.setdefault(name, set()).add(_api(value, aliases, returns))
    out = {}
    for name, apis in bound.items():
        found = {a for a in apis if a is not None}
        if len(found) == 1 and name not in aliases:
            out[name] = found.pop()
    if any("." in name for name in out):
        out[""] = "."  # tells qualname to look attribute bindings up (most files have none)
    return out

