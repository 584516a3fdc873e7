"""Availability guards: code that runs only where an optional package is installed.

An import of a CUDA-only library behind such a guard is an optional integration, not a
dependency of the port: ``if is_bnb_available(): import bitsandbytes``, ``if
importlib.util.find_spec("flash_attn") is not None: ...``, ``if HAS_APEX:`` where ``HAS_APEX``
was set by one of those or in a ``try: import ... except ImportError`` block, and the rest of a
block after ``if not is_x_available(): raise ...``. The description follows the branches as
written: ``if xformers_available: ... else: raise ...`` guards nothing (the run stops without the
package, so it is required). (``try/except ImportError`` around the
import itself is handled by the kernels family as it walks.)
"""

from __future__ import annotations

import ast
import re

from .nodes import qualname

#: callables that answer "is this package installed"
GUARD_CALL = re.compile(r"(?:^|\.)(?:_?is_\w+_available|_?is_package_available|find_spec|find_loader|"
                        r"module_available|package_available|is_installed|RequirementCache)$")
#: flag names that say a package is there (besides the ones the file sets from a guard)
GUARD_FLAG = re.compile(r"^_?(?:HAS_\w+|has_\w+|\w+_AVAILABLE|\w+_available|_?is_\w+_available|\w+_INSTALLED)$")
IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
#: decorators that run a test or function only where a package is there (`@require_bnb`)
GUARD_DECORATOR = re.compile(r"(?:^|\.)(?:requires?_(\w+)|skip_?unless\w*|skipif|skip_if\w*|importorskip)$", re.I)
_GUARD_WORD = re.compile(r"(?:^|\.)_?is_(\w+?)_available$|(?:^|\.)requires?_(\w+)$")


class Guards:
    """The line ranges of one file that run only when an optional package is available."""

    def __init__(self, tree: ast.Module, aliases: dict[str, str]):
        self.aliases = aliases
        self.flags: set[str] = set()
        self.ranges: list[tuple[int, int]] = []
        self.words: set[str] = set()  # the packages the file checks for (`bnb` of is_bnb_available)
        self._flags(tree)
        self._blocks(tree.body)

    def covers(self, line: int, library: str = "", nested: bool = False) -> bool:
        """``line`` runs only where a package is available: it is in a guarded block, or (for
        an import inside a function, ``nested``) the file checks ``library``'s availability
        somewhere: accelerate's bnb helpers import bitsandbytes in functions that only
        guarded callers reach."""
        if any(first <= line <= last for first, last in self.ranges):
            return True
        return nested and any(_names_library(part, library) for word in self.words
                              for part in (word, *word.split("_")))  # is_4bit_bnb_available: bnb

    # -- what a guard looks like -------------------------------------------------
    def is_guard(self, test: ast.AST) -> bool:
        if isinstance(test, ast.Call):
            name = qualname(test.func, self.aliases)
            return name is not None and GUARD_CALL.search(name) is not None
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.is_guard(test.operand)
        if isinstance(test, (ast.Name, ast.Attribute)):
            name = test.id if isinstance(test, ast.Name) else test.attr
            return name in self.flags or (name != "is_available" and GUARD_FLAG.match(name) is not None)
        if isinstance(test, ast.Compare):
            return self.is_guard(test.left)
        if isinstance(test, ast.BoolOp):
            return any(self.is_guard(v) for v in test.values)
        return False

    def _negated(self, test: ast.AST) -> bool:
        return isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and self.is_guard(test.operand)

    # -- flags the file sets ------------------------------------------------------
    def _flags(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                self._word(node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for decorator in node.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    name = qualname(target, self.aliases) or ""
                    if GUARD_DECORATOR.search(name):
                        self.ranges.append((node.lineno, node.end_lineno or node.lineno))
                        self._word_of(name)
            if isinstance(node, ast.Assign) and self.is_guard(node.value):
                self.flags.update(_names(node.targets))
            elif isinstance(node, ast.Try) and any(_catches_import_error(h, self.aliases) for h in node.handlers):
                if any(isinstance(s, (ast.Import, ast.ImportFrom)) for s in node.body):
                    for stmt in node.body:
                        if isinstance(stmt, ast.Assign):
                            self.flags.update(_names(stmt.targets))
                    for handler in node.handlers:
                        for stmt in handler.body:
                            if isinstance(stmt, ast.Assign):
                                self.flags.update(_names(stmt.targets))

    def _word(self, call: ast.Call) -> None:
        name = qualname(call.func, self.aliases) or ""
        if name.endswith(("find_spec", "importorskip", "find_loader")) and call.args:
            value = call.args[0]
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                self.words.add(value.value.split(".")[0])
        else:
            self._word_of(name)

    def _word_of(self, name: str) -> None:
        m = _GUARD_WORD.search(name)
        if m:
            self.words.add((m.group(1) or m.group(2)).lower())

    # -- guarded blocks -----------------------------------------------------------
    def _blocks(self, body: list[ast.stmt]) -> None:
        for i, stmt in enumerate(body):
            if isinstance(stmt, ast.If):
                if self.is_guard(stmt.test) and not self._negated(stmt.test) and _raises(stmt.orelse):
                    pass  # `if x_available: ... else: raise`: the package is required, not optional
                elif self.is_guard(stmt.test):
                    self.ranges.append((stmt.body[0].lineno, stmt.body[-1].end_lineno or stmt.lineno))
                elif self._negated(stmt.test) and _exits(stmt.body) and i + 1 < len(body):
                    rest = body[i + 1:]
                    self.ranges.append((rest[0].lineno, rest[-1].end_lineno or rest[0].lineno))
            for field in ("body", "orelse", "finalbody"):
                block = getattr(stmt, field, None)
                if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                    self._blocks(block)
            for handler in getattr(stmt, "handlers", ()):
                self._blocks(handler.body)


def _names_library(word: str, library: str) -> bool:
    """The guard's word names the library: `bitsandbytes` or its initials-like short form
    `bnb` (the word's letters in order in the name, starting alike), `flash_attn_2`."""
    word, library = word.lower(), library.split(".")[0].lower()
    if not word or not library or word[0] != library[0]:
        return False
    if word.startswith(library) or library.startswith(word):
        return True
    letters = iter(library)
    return len(word) >= 2 and all(ch in letters for ch in word if ch != "_")


def _names(targets: list[ast.expr]) -> set[str]:
    out = set()
    for target in targets:
        if isinstance(target, ast.Name):
            out.add(target.id)
        elif isinstance(target, ast.Attribute):
            out.add(target.attr)
    return out


def _raises(body: list[ast.stmt]) -> bool:
    """The branch ends the run: it raises (or calls ``sys.exit``/``exit``)."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.Raise):
        return True
    if isinstance(last, ast.If):  # `else: if ...: raise` written as `elif`: every branch must raise
        return _raises(last.body) and _raises(last.orelse)
    return (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
            and qualname(last.value.func, {}) in ("sys.exit", "exit", "quit"))


def _exits(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Raise, ast.Return))


def _catches_import_error(handler: ast.ExceptHandler, aliases: dict[str, str]) -> bool:
    kind = handler.type
    if kind is None:
        return True
    names = kind.elts if isinstance(kind, ast.Tuple) else [kind]
    return any(qualname(n, aliases) in IMPORT_ERRORS for n in names)
