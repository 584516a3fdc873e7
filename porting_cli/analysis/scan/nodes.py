"""Reading the standard library's ``ast`` nodes the way the rules need them.

Positions: ``ast`` counts columns in UTF-8 bytes; findings and edits use characters of the
text. ``SourceText`` converts (only lines with non-ASCII characters need it) and turns node
positions into offsets in the text, which is what the edits replace (porting_cli/analysis/scan/apply.py).

Literals: a string is a *plain literal* only when it is one quoted token (``"a" "b"`` is two
literals glued together, an f-string is no literal), as in the rule family docs.
"""

from __future__ import annotations

import ast
import bisect
import functools
import keyword as python_keyword
import re
import weakref

STRING_START = re.compile(r"[rRbBuUfF]{0,2}('''|\"\"\"|'|\")")


#: fields that hold only leaves without fields of their own (``Load``, ``Add``, ``Eq``, ...): a
#: walk that has nothing to do at them skips them (a third of all nodes are loads and stores)
LEAF_FIELDS = {"ctx": ast.expr_context, "op": (ast.operator, ast.unaryop, ast.boolop), "ops": ast.cmpop}


@functools.lru_cache(maxsize=None)
def child_fields(kind: type, skipped: frozenset[str] = frozenset(LEAF_FIELDS)) -> tuple[str, ...]:
    """The fields of node type ``kind`` to walk, less ``skipped``."""
    return tuple(field for field in kind._fields if field not in skipped)


class SourceText:
    """The parsed text (without a byte-order mark) and its lines."""

    def __init__(self, text: str, lines: list[str]):
        self.text = text
        self.lines = lines
        self.starts = [0]
        for line in lines:
            self.starts.append(self.starts[-1] + len(line))
        self.ascii = text.isascii()

    def column(self, line: int, byte_col: int) -> int:
        """The character column of ``ast``'s byte column ``byte_col`` on 1-based ``line``."""
        if self.ascii or line > len(self.lines):
            return byte_col
        text = self.lines[line - 1]
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def offset(self, line: int, byte_col: int) -> int:
        return self.starts[line - 1] + self.column(line, byte_col)

    def span(self, node: ast.AST) -> tuple[int, int]:
        given = getattr(node, "span", None)  # a piece of a glued string literal
        if given is not None:
            return given
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno or node.lineno, node.end_col_offset or 0))

    def outer_span(self, node: ast.AST) -> tuple[int, int]:
        """The span of ``node`` with the parentheses that group it (``(x)``: not those of a
        call): what an edit that replaces the node replaces."""
        start, end = self.span(node)
        if not isinstance(node, ast.expr) or hasattr(node, "span"):
            return start, end
        text = self.text
        while True:
            before = skip_space(text, start - 1, -1)
            after = skip_space(text, end, 1)
            if before < 0 or after >= len(text) or text[before] != "(" or text[after] != ")" \
                    or not self._groups(before):
                return start, end
            start, end = before, after + 1

    def _groups(self, paren: int) -> bool:
        """The "(" at ``paren`` opens a group, not the arguments of a call, def or class."""
        text = self.text
        i = skip_space(text, paren - 1, -1)
        if i < 0:
            return True
        if text[i].isalnum() or text[i] == "_":
            j = i
            while j >= 0 and (text[j].isalnum() or text[j] == "_"):
                j -= 1
            return python_keyword.iskeyword(text[j + 1:i + 1])
        return text[i] not in ")]\"'"

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def line_of_offset(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def first_newline(self) -> str:
        m = re.search(r"\r\n|\r|\n", self.text)
        return m.group(0) if m else "\n"


def skip_space(text: str, i: int, step: int) -> int:
    while 0 <= i < len(text) and text[i] in " \t\r\n\f\\":
        i += step
    return i


def literal_end(text: str, start: int = 0) -> int:
    """The offset just after the string literal that starts at ``start`` in ``text``."""
    m = STRING_START.match(text, start)
    if m is None:
        return -1
    quote = m.group(1)
    i = m.end()
    while True:  # the first quote with no backslash before it (str.find, not a loop over characters)
        close = text.find(quote, i)
        if close < 0:
            return -1
        escape = text.find("\\", i, close)
        if escape < 0:
            return close + len(quote)
        i = escape + 2  # the escaped character cannot close the literal


def is_plain_literal(text: str) -> bool:
    """``text`` is exactly one (non-f) string literal token."""
    if not text or text[0] in "fF" or (len(text) > 1 and text[1] in "fF"):
        return False
    return literal_end(text) == len(text)


class Strings:
    """The plain string literals of a file, the way a token reader sees them: each literal
    glued into an implicit concatenation counts on its own, f-strings not at all."""

    def __init__(self, source: SourceText):
        self.source = source

    def value(self, node: ast.AST) -> str | None:
        """The value of a plain string literal (one token), else None."""
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            return None
        if node.lineno == node.end_lineno and self.source.ascii:
            text = self.source.lines[node.lineno - 1][node.col_offset:node.end_col_offset]
        else:
            text = self.source.segment(node)
        if text[:1] in ("'", '"') and literal_end(text) == len(text):
            return node.value
        return node.value if is_plain_literal(text) else None

    def folded(self, node: ast.AST) -> str | None:
        """The value of a string expression made of constants: a literal, an f-string without
        placeholders (``f"cuda"``), ``+`` of such strings, ``%`` with constant operands."""
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.JoinedStr):
            if all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in node.values):
                return "".join(v.value for v in node.values)
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.folded(node.left), self.folded(node.right)
            return left + right if left is not None and right is not None else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            left = self.folded(node.left)
            right = node.right
            values = right.elts if isinstance(right, ast.Tuple) else [right]
            if left is None or not all(isinstance(v, ast.Constant) for v in values):
                return None
            try:
                return left % tuple(v.value for v in values)
            except (TypeError, ValueError):
                return None
        return None

    def is_fstring(self, node: ast.JoinedStr) -> bool:
        """One f-string token (not literals glued to one)."""
        start, end = self.source.span(node)
        text = self.source.text
        m = STRING_START.match(text, start)
        return m is not None and "f" in m.group(0)[:-len(m.group(1))].lower() and literal_end(text, start) == end

    def pieces(self, node: ast.Constant) -> list[tuple[str, int, int]]:
        """(value, start offset, end offset) of each literal of a str/bytes constant; only str
        pieces are kept (a bytes literal has no string value)."""
        start, end = self.source.span(node)
        text = self.source.text
        if self.value(node) is not None:
            return [(node.value, start, end)]
        out = []
        i = start
        while i < end:
            while i < end and text[i] in " \t\r\n\\\f#":
                if text[i] == "#":  # a comment between the glued literals
                    while i < end and text[i] not in "\r\n":
                        i += 1
                else:
                    i += 1
            if i >= end:
                break
            if text[i] == "(":
                i += 1
                continue
            stop = literal_end(text, i)
            if stop < 0:
                break
            token = text[i:stop]
            if token[0] not in "fFbB" and not (len(token) > 1 and token[1] in "fFbB"):
                try:
                    out.append((ast.literal_eval(token), i, stop))
                except (ValueError, SyntaxError):  # pragma: no cover - a token ast accepted
                    pass
            i = stop
        return out


#: the fields of a compound statement that hold statement lists, in the order they are walked
#: (a handler's or a case's list is its own `body`)
BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


@functools.lru_cache(maxsize=None)
def block_fields(kind: type) -> tuple[str, ...]:
    """The BLOCK_FIELDS statement type ``kind`` has."""
    return tuple(field for field in BLOCK_FIELDS if field in kind._fields)


def iter_blocks(stmt: ast.stmt):
    """The statement lists nested directly in a compound statement (none in an expression's
    `body`, such as a lambda's)."""
    for field in block_fields(type(stmt)):
        block = getattr(stmt, field)
        if field == "handlers" or field == "cases":
            for part in block:
                yield part.body
        elif type(block) is list and block and isinstance(block[0], ast.stmt):
            yield block


def iter_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Every statement of ``body`` and of the blocks nested in it, in order (each statement,
    then the statements of its blocks as iter_blocks gives them)."""
    out: list[ast.stmt] = []
    _collect(body, out)
    return out


def _collect(body: list[ast.stmt], out: list[ast.stmt]) -> None:
    # iter_blocks inlined: this runs over every statement of every file scanned
    for stmt in body:
        out.append(stmt)
        for field in block_fields(type(stmt)):
            block = getattr(stmt, field)
            if field == "handlers" or field == "cases":
                for part in block:
                    _collect(part.body, out)
            elif block:
                _collect(block, out)


_last_module: dict[str, tuple] = {}


def module_statements(tree: ast.Module) -> list[ast.stmt]:
    """iter_statements of the whole module, remembered while the tree lives (the import map,
    the value aliases and some families each go through every statement of one file); the
    list is dropped with its tree, so it never keeps an old file's statements alive."""
    entry = _last_module.get("tree")
    if entry is None or entry[0]() is not tree:
        entry = _last_module["tree"] = (weakref.ref(tree, _forget), iter_statements(tree.body))
    return entry[1]


def _forget(ref: weakref.ref) -> None:
    entry = _last_module.get("tree")
    if entry is not None and entry[0] is ref:
        del _last_module["tree"]


def int_value(node: ast.AST) -> int | None:
    """The value of an integer literal (not a bool)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw
    return None


def positional(call: ast.Call) -> list[ast.expr]:
    return [a for a in call.args if not isinstance(a, ast.Starred)]


def call_arguments(call: ast.Call) -> list[ast.AST]:
    """Positional, starred and keyword arguments in the order they are written."""
    if not call.keywords or not call.args:
        return [*call.args, *call.keywords]
    return sorted([*call.args, *call.keywords], key=lambda a: (a.lineno, a.col_offset))


def qualname(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """Dotted name of a Name/Attribute chain, through the import aliases."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return chain_qualname(node, parts, aliases)


def chain_qualname(head: ast.AST, parts: list[str], aliases: dict[str, str]) -> str | None:
    """``qualname`` of a chain already walked (a walk that also does other work at each link):
    ``head`` is what the chain starts from, ``parts`` its attributes from the outermost in
    (the list is used up)."""
    if not isinstance(head, ast.Name):
        return None
    if parts and "." in aliases.get("", ""):  # the file binds attributes too (self.autocast = ...)
        bound = aliases.get(f"{head.id}.{parts[-1]}")
        if bound is not None:
            parts[-1] = bound
            return ".".join(reversed(parts))
    parts.append(aliases.get(head.id, head.id))
    return ".".join(reversed(parts))


def is_name(node: ast.AST | None, value: str) -> bool:
    """``None`` / ``True`` / ``False`` / a plain name spelled ``value``."""
    if isinstance(node, ast.Name):
        return node.id == value
    if isinstance(node, ast.Constant) and value in ("None", "True", "False"):
        return node.value is {"None": None, "True": True, "False": False}[value]
    return False
