"""The safety net (rule NC999): a code token that names CUDA and that no rule explained.

The rule families know what CUDA code *means* and how to fix it; the net knows only what it
*says*. After the families ran, every token of the file that names CUDA (``cuda``, ``nccl``,
``cudnn``, ``nvtx``, ``cupy`` as a word of an identifier, ``CUDA_*`` / ``NCCL_*`` names) on a
line that has no finding yet becomes a finding at that token, so a line that holds CUDA code
never goes unreported, however the code spells it.

Tokens that count: names, attribute names, keyword-argument names, parameter names, the names a
``def``/``class``/``import`` binds, imported module names, and string constants used as values
(a short string with no space in it: ``"cuda:0"``, ``"nccl"``, ``"CUDA_VISIBLE_DEVICES"``, the
text of ``f"cuda:{rank}"``). Prose never counts: comments (not in the tree), docstrings, and the
strings of messages (``print``, logging, ``warnings.warn``, exceptions raised, ``assert``
messages, argparse ``help=``/``description=``); code inside a message's f-string still counts.
"""

from __future__ import annotations

import ast
import bisect
import functools
import re

from .nodes import SourceText

#: the words that name CUDA, as parts of identifiers and token-like strings
NET_WORDS = re.compile(r"cuda|nccl|cudnn|nvtx|cupy|nvidia.?smi|nvml", re.IGNORECASE)
#: NVIDIA's own tools: `subprocess.run(["nvidia-smi", ...])`, pynvml's `nvmlInit`
NVIDIA_TOOLS = re.compile(r"nvidia[-_]?smi|(?:^|_|\b)nvml", re.IGNORECASE)
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
#: calls whose string arguments are messages for a person
MESSAGE_CALLS = frozenset({"print", "warn", "info", "debug", "warning", "error", "critical", "exception",
                           "log", "fatal", "echo", "secho", "write", "print_rank_0", "print0", "rank0_print",
                           "log_info", "log_rank_0", "log_dist", "set_description", "set_postfix_str"})
#: string methods whose arguments are text the code looks for (values, not messages)
TEXT_METHODS = frozenset({"startswith", "endswith", "find", "rfind", "index", "count", "replace", "split",
                          "partition", "removeprefix", "removesuffix", "search", "match", "fullmatch"})
#: keywords whose string values are text for a person
MESSAGE_KEYWORDS = frozenset({"help", "description", "epilog", "usage", "msg", "message", "desc", "title"})


@functools.lru_cache(maxsize=4096)
def names_cuda(word: str) -> bool:
    """``word`` (an identifier or a token-like string) has a word that names CUDA: `use_cuda`,
    `CUDAGraph`, `ProcessGroupNCCL`, `cuda:0`; not `occupy` or `barracuda`."""
    if not NET_WORDS.search(word):
        return False
    if NVIDIA_TOOLS.search(word):
        return True
    for part in re.split(r"[^A-Za-z0-9]+", word):
        for sub in _PARTS.findall(part) or [part]:
            low = sub.lower()
            if low.startswith(("cuda", "nccl", "cudnn", "nvtx")) or low in ("cupy", "cupyx"):
                return True
    return False


_TOKEN_TEXT = re.compile(r"[A-Za-z0-9_.:,/=+\-]{1,80}\Z")


def token_string(value: str) -> bool:
    """A string that is a value, not text: short, made of the characters of names, device
    strings and options (`cuda:0`, `--cuda`, `cuda:nccl,cpu:gloo`), no space, no brackets."""
    text = value.strip()
    return _TOKEN_TEXT.match(text) is not None and names_cuda(text)


class Spot:
    """A token's place: ``span`` is its offsets in the text (see SourceText.span)."""

    __slots__ = ("span",)

    def __init__(self, start: int, end: int):
        self.span = (start, end)


def prose_strings(node: ast.AST) -> list[ast.AST]:
    """The parts of ``node`` (a call, ``raise`` or ``assert``) that are messages for a person:
    what the rules must never read as code values."""
    if isinstance(node, ast.Call):
        if callee_name(node) in MESSAGE_CALLS:
            return [*node.args, *(kw.value for kw in node.keywords)]
        return [kw.value for kw in node.keywords if kw.arg in MESSAGE_KEYWORDS]
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
        return [*node.exc.args, *(kw.value for kw in node.exc.keywords)]
    if isinstance(node, ast.Assert) and node.msg is not None:
        return [node.msg]
    return []


def callee_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


class NetWalk:
    """Collects the unexplained CUDA tokens of the statements that touch ``lines``."""

    def __init__(self, source: SourceText, lines: list[int], reported: set[int]):
        self.source = source
        self.lines = lines
        self.reported = reported
        self.found: dict[int, tuple[int, int, str]] = {}  # line -> (start, end, token) of the first

    # -- positions -------------------------------------------------------------
    def _add(self, start: int, end: int, token: str) -> None:
        line = self.source.line_of_offset(start)
        if line in self.reported:
            return
        have = self.found.get(line)
        if have is None or start < have[0]:
            self.found[line] = (start, end, token)

    def _node_token(self, node: ast.AST, token: str) -> None:
        start, end = self.source.span(node)
        self._add(start, end, token)

    def _named_at(self, node: ast.AST, name: str, after: int | None = None) -> None:
        """``name`` written inside ``node`` (a def's or an import's name): find its offset."""
        start, end = self.source.span(node)
        text = self.source.text
        at = text.find(name, start if after is None else after, end)
        if at < 0:
            at = start
        self._add(at, at + len(name), name)

    def _triple_quoted(self, node: ast.Constant) -> bool:
        """A triple-quoted string is a block of text (a docstring kept in a variable)."""
        start, _ = self.source.span(node)
        head = self.source.text[start:start + 5].lstrip("rRbBuU")
        return head.startswith(('"""', "'''"))

    def _touches(self, stmt: ast.stmt) -> bool:
        decorators = getattr(stmt, "decorator_list", None)
        first = min(d.lineno for d in decorators) if decorators else stmt.lineno
        i = bisect.bisect_left(self.lines, first)
        return i < len(self.lines) and self.lines[i] <= (stmt.end_lineno or first)

    # -- the walk --------------------------------------------------------------
    def body(self, stmts: list[ast.stmt]) -> None:
        for i, stmt in enumerate(stmts):
            if not self._touches(stmt):
                continue
            if i == 0 and type(stmt) is ast.Expr and isinstance(stmt.value, ast.Constant):
                continue  # a docstring (and any bare string statement first in a block)
            if type(stmt) is ast.Expr and isinstance(stmt.value, (ast.Constant, ast.JoinedStr)):
                continue  # a bare string statement: documentation
            self.node(stmt)

    def node(self, node: ast.AST) -> None:
        kind = type(node)
        if kind is ast.Name:
            if names_cuda(node.id):
                self._node_token(node, node.id)
            return
        if kind is ast.Constant:
            if isinstance(node.value, str) and token_string(node.value) and not self._triple_quoted(node):
                self._named_at(node, node.value.strip())
            return
        if kind is ast.JoinedStr:
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            sentence = any(c.isspace() for c in text.strip())  # f"cuda:{i} is out of memory": text
            for value in node.values:
                if type(value) is ast.FormattedValue:
                    self.node(value)
                elif not sentence and isinstance(value, ast.Constant) and token_string(value.value):
                    self._named_at(node, value.value.strip())
            return
        if kind is ast.Attribute:
            self.node(node.value)
            if names_cuda(node.attr):
                _, end = self.source.span(node)
                self._add(end - len(node.attr), end, node.attr)
            return
        if kind is ast.Call:
            self._call(node)
            return
        if kind is ast.Compare:  # `"CUDA out of memory" in str(e)`: text compared is a value
            for operand in (node.left, *node.comparators):
                self._compared_text(operand)
                self.node(operand)
            return
        if kind is ast.keyword:
            if node.arg and names_cuda(node.arg):
                self._named_at(node, node.arg)
            if node.arg not in MESSAGE_KEYWORDS:
                self.node(node.value)
            return
        if kind is ast.arg:
            if names_cuda(node.arg):
                self._named_at(node, node.arg)
            if node.annotation is not None:
                self.node(node.annotation)
            return
        if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            for decorator in node.decorator_list:
                self.node(decorator)
            if names_cuda(node.name):
                header = self.source.offset(node.lineno, node.col_offset)
                self._named_at(node, node.name, after=header)
            for field in ("args", "returns", "bases", "keywords"):
                value = getattr(node, field, None)
                if isinstance(value, list):
                    for item in value:
                        self.node(item)
                elif value is not None:
                    self.node(value)
            self.body(node.body)
            return
        if kind is ast.Import or kind is ast.ImportFrom:
            self._import(node)
            return
        if kind is ast.Assert:
            self.node(node.test)  # the message is prose
            return
        if kind is ast.Raise:
            if node.exc is not None:
                self._raised(node.exc)
            if node.cause is not None:
                self.node(node.cause)
            return
        for field in node._fields:
            value = getattr(node, field)
            if type(value) is list:
                if value and isinstance(value[0], ast.stmt):
                    self.body(value)
                else:
                    for item in value:
                        if isinstance(item, ast.AST):
                            self.node(item)
            elif isinstance(value, ast.AST):
                self.node(value)

    def _call(self, call: ast.Call) -> None:
        """A message's arguments are left out whole: what a log line interpolates is for a
        person to read (the specific rules still see CUDA calls made there)."""
        self.node(call.func)
        if callee_name(call) in MESSAGE_CALLS:
            return
        for arg in call.args:
            if callee_name(call) in TEXT_METHODS:  # str(e).startswith("CUDA error")
                self._compared_text(arg)
            self.node(arg)
        for kw in call.keywords:
            self.node(kw)

    def _compared_text(self, node: ast.AST) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and names_cuda(node.value):
            word = next(w for w in re.split(r"[^A-Za-z0-9_]+", node.value) if w and names_cuda(w))
            self._named_at(node, word)

    def _raised(self, exc: ast.expr) -> None:
        """``raise Error("text")``: the class is code, its arguments a message."""
        self.node(exc.func if isinstance(exc, ast.Call) else exc)

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.ImportFrom) and node.module and names_cuda(node.module):
            self._named_at(node, node.module)
            return
        for alias in node.names:
            words = [*alias.name.split("."), *([alias.asname] if alias.asname else [])]
            word = next((w for w in words if names_cuda(w)), None)
            if word is not None:
                self._named_at(alias, word)
                return


def net_tokens(source: SourceText, tree: ast.Module, lines: list[int], reported: set[int]):
    """(start, end, token) of the first unexplained CUDA token of each line in ``lines``
    (sorted 1-based numbers) that is not in ``reported``."""
    walk = NetWalk(source, lines, reported)
    walk.body(tree.body)
    return [walk.found[line] for line in sorted(walk.found)]
