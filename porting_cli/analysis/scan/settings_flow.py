"""Which dicts of settings reach a data loader (issue 45, item 4).

`"pin_memory": True` in a dict is a request for pinned host memory only where the dict is given to
something that pins: unpacked into a loader (`DataLoader(ds, **loader_kwargs)`, a loader wrapper,
a loader-building function of the script), directly or through the copies and merges scripts make
(`kwargs.update(cuda_kwargs)`, `dict(base)`, `{**base, ...}`, `base.copy()`, `kw |= {...}`), or
part of a DeepSpeed config (its offload sections pin host memory). A dict that is only logged,
saved or handed to argparse is settings, not pinned memory. Names are followed by their text
(`loader_kwargs`, `self.loader_kwargs`) across the whole file: scripts rarely reuse such a name
for something else, and a finding missed costs more than one reported twice.
"""

from __future__ import annotations

import ast
import re

from .dataflow import dotted
from .frameworks import DEEPSPEED_KEYS

#: a callee whose last name says it builds a loader: DataLoader, StatefulDataLoader, build_dataloader
LOADER = re.compile(r"loader", re.IGNORECASE)
COPIES = frozenset({"copy", "deepcopy"})


class SettingsFlow:
    """The dicts (literals and `dict(...)` calls) and dict names of one file that reach a loader."""

    def __init__(self, tree: ast.Module, qualname, string_value):
        self._qualname = qualname
        self._string = string_value
        self._functions = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.names: set[str] = set()      # dict names unpacked into a loader, or merged into one that is
        self.dicts: set[int] = set()      # ids of the dict literals / dict() calls that reach one
        self._flows: list[tuple[str, str]] = []           # (source name, name it is merged into)
        self._held: dict[str, list[ast.AST]] = {}          # name -> the dicts assigned or merged into it
        for node in ast.walk(tree):
            self._read(node)
        self._close()

    def reaches(self, node: ast.AST) -> bool:
        return id(node) in self.dicts

    def name_reaches(self, node: ast.AST) -> bool:
        name = dotted(node)
        return name is not None and name in self.names

    # -- reading the file ---------------------------------------------------------------------
    def _is_loader(self, call: ast.Call) -> bool:
        name = self._qualname(call.func) or dotted(call.func) or ""
        last = name.rpartition(".")[2]
        return bool(LOADER.search(last)) or last in self._functions

    def _read(self, node: ast.AST) -> None:
        if isinstance(node, ast.Dict) and any(self._string(k) in DEEPSPEED_KEYS for k in node.keys if k is not None):
            self.dicts.update(id(inner) for inner in ast.walk(node) if isinstance(inner, (ast.Dict, ast.Call)))
        if isinstance(node, ast.Call):
            if self._is_loader(node):
                for arg in node.keywords:
                    if arg.arg is None:
                        self._sink(arg.value)
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "update" and dotted(func.value):
                target = dotted(func.value)
                for value in (*node.args, *(k.value for k in node.keywords if k.arg is None)):
                    self._merge(value, target)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if dotted(target):
                    self._merge(node.value, dotted(target))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.BitOr) and dotted(node.target):
            self._merge(node.value, dotted(node.target))

    def _sink(self, value: ast.AST) -> None:
        """``value`` is unpacked into a loader."""
        if dotted(value):
            self.names.add(dotted(value))
        else:
            self._merge(value, None)

    def _merge(self, value: ast.AST, target: str | None) -> None:
        """The settings ``value`` holds flow into the dict named ``target`` (None: into a loader)."""
        for part in self._parts(value):
            name = dotted(part)
            if name is None:
                if target is None:
                    self.dicts.add(id(part))
                else:
                    self._held.setdefault(target, []).append(part)
            elif target is None:
                self.names.add(name)
            else:
                self._flows.append((name, target))

    def _parts(self, value: ast.AST):
        """The dicts and dict names ``value`` is made of: `{...}` (and its `**x` entries), `dict(x, k=v)`,
        `x.copy()`, `copy.deepcopy(x)`, a name."""
        if isinstance(value, ast.Dict):
            yield value
            for key, inner in zip(value.keys, value.values):
                if key is None:
                    yield from self._parts(inner)
        elif isinstance(value, ast.Call):
            callee = self._qualname(value.func) or dotted(value.func) or ""
            if callee == "dict":
                yield value
                for inner in (*value.args, *(k.value for k in value.keywords if k.arg is None)):
                    yield from self._parts(inner)
            elif callee.rpartition(".")[2] in COPIES:
                source = value.func.value if isinstance(value.func, ast.Attribute) and not value.args else \
                    (value.args[0] if value.args else None)
                if source is not None:
                    yield from self._parts(source)
        elif dotted(value):
            yield value

    def _close(self) -> None:
        """Names merged into a reaching name reach too, to a fixed point; then their dicts do."""
        grew = True
        while grew:
            grew = False
            for source, target in self._flows:
                if target in self.names and source not in self.names:
                    self.names.add(source)
                    grew = True
        for name in self.names:
            self.dicts.update(id(d) for d in self._held.get(name, ()))
