"""Which names of a file hold a CUDA device index, a CUDA device string or a CUDA test.

`.to(rank)` is only CUDA-specific when `rank` *is* a device index, so the scan
follows values rather than trusting names. One pass over the standard
library's ``ast`` (fast) collects, per file and ignoring scopes as the alias
map does:

* **index**: an integer that will be used as a CUDA device: `LOCAL_RANK` /
  `RANK` from the environment, `torch.cuda.current_device()`, an argparse
  `--gpu` / `--local_rank` option, the first parameter of a function started
  by `mp.spawn`, a loop over `range(torch.cuda.device_count())`;
* **string**: a value that may be a `"cuda"` / `"cuda:N"` device string,
  literal or built (`f"cuda:{i}"`, `"cuda:" + str(i)`, `"cuda" if c else "cpu"`);
* **test**: the truth value of a CUDA test (`device == "cuda"`, `x.is_cuda`).

Kinds flow through assignments (`self.gpu_id = gpu_id` makes `self.gpu_id`
an index), arithmetic (`rank % n`), `int()` / `str()`, and into the parameters of
functions of the same file (positional and keyword arguments), until nothing
changes. Keys are dotted names: `rank`, `self.gpu_id`, `args.gpu`.
"""

from __future__ import annotations

import ast
import dataclasses
import re

from .flow_facts import AMP_WRAPPED, INDEX_OPTIONS, FlowFacts
from .nodes import qualname
from .source import mentions

INDEX, STRING, TEST, ARGS = "index", "string", "test", "args"
INDEX_ENV = frozenset({"LOCAL_RANK", "RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                       "MPI_LOCALRANKID"})
CUDA_STRING = re.compile(r"cuda(?::\d+)?\Z")
SPAWN = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
                   "torch.multiprocessing.spawn.spawn"})
INDEX_CALLS = frozenset({"torch.cuda.current_device", "torch.cuda.device_count"})
MAX_ROUNDS = 8  # propagation rounds; real files settle in two or three


@dataclasses.dataclass
class DeviceFlow:
    """Dotted name -> the kinds of value it may hold."""

    kinds: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    #: (line, character column) of a call argument -> its kinds (arguments with none are left out)
    sites: dict[tuple[int, int], set[str]] = dataclasses.field(default_factory=dict)
    #: lines of `fused=` arguments whose value is decided by a CUDA test
    fused_lines: set[int] = dataclasses.field(default_factory=set)
    #: local classes whose body creates a `torch.cuda.amp.GradScaler` / autocast -> their lines
    amp_wrappers: dict[str, range] = dataclasses.field(default_factory=dict)
    #: lines of calls that create an instance of such a class outside its own body
    amp_wrapper_calls: set[int] = dataclasses.field(default_factory=set)

    def at(self, line: int, col: int) -> set[str]:
        return self.sites.get((line, col), set())

    def any_has(self, node: ast.AST, kind: str) -> bool:
        """Some binding of the dotted name of ``node`` (in any scope) may hold ``kind``."""
        name = dotted(node)
        if name is None:
            return False
        return any(kind in kinds and (key == name or key.endswith(":" + name)) for key, kinds in self.kinds.items())

    def has(self, name: str | None, kind: str) -> bool:
        return name is not None and kind in self.kinds.get(name, ())

    def add(self, name: str, kinds: set[str]) -> bool:
        have = self.kinds.setdefault(name, set())
        new = kinds - have
        have |= new
        return bool(new)


def dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def is_env_lookup(node: ast.AST, aliases: dict[str, str]) -> bool:
    """`os.environ["LOCAL_RANK"]`, `os.environ.get("RANK", ...)`, `os.getenv("LOCAL_RANK")`."""
    if isinstance(node, ast.Subscript) and qualname(node.value, aliases) == "os.environ":
        key = node.slice
        return isinstance(key, ast.Constant) and key.value in INDEX_ENV
    if isinstance(node, ast.Call) and node.args:
        func = qualname(node.func, aliases)
        key = node.args[0]
        return func in ("os.environ.get", "os.getenv") and isinstance(key, ast.Constant) \
            and key.value in INDEX_ENV
    return False


class _Flow:
    def __init__(self, tree: ast.Module, aliases: dict[str, str]):
        self.tree = tree
        self.aliases = aliases
        self.flow = DeviceFlow()
        facts = FlowFacts(tree, aliases)
        self.facts = facts
        self.functions = facts.functions
        self.index_dests = facts.index_dests
        self.scope_of = facts.scope_of
        self.locals = facts.locals
        self.loops = facts.loops
        self.param_scopes = facts.param_scopes

    def key(self, name: str, scope: str, line: int) -> str:
        """The flow key of a dotted name used at ``line`` in ``scope``."""
        head, dot, rest = name.partition(".")
        if head == "self" and dot:
            return name  # attributes of self: one value per class attribute, as for the alias map
        inner = None
        for start, end, key in self.loops.get((scope, head), ()):
            if start <= line <= end and (inner is None or start > inner[0]):
                inner = (start, key)
        if inner is not None:
            base = inner[1]
        elif head in self.locals.get(scope, ()):
            base = f"{scope}:{head}"
        else:
            base = f":{head}"
        return base + dot + rest

    # -- the kinds of an expression --------------------------------------------
    def kinds(self, node: ast.AST | None, scope: str | None = None) -> set[str]:
        if node is None:
            return set()
        if scope is None:
            scope = self.scope_of.get(id(node), "")
        k = lambda n: self.kinds(n, scope)  # noqa: E731
        if isinstance(node, ast.Constant):
            return {STRING} if isinstance(node.value, str) and CUDA_STRING.match(node.value) else set()
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = dotted(node)
            found = set(self.flow.kinds.get(self.key(name, scope, node.lineno), ())) if name else set()
            if isinstance(node, ast.Attribute):
                if node.attr == "is_cuda":
                    found.add(TEST)
                if node.attr in self.index_dests and ARGS in k(node.value):
                    found.add(INDEX)
            return found
        if isinstance(node, ast.JoinedStr):
            first = node.values[0] if node.values else None
            if isinstance(first, ast.Constant) and str(first.value).startswith("cuda:"):
                return {STRING}
            return set()
        if isinstance(node, ast.BinOp):
            left, right = k(node.left), k(node.right)
            if isinstance(node.op, ast.Add) and STRING in left:
                return {STRING}
            return {INDEX} if INDEX in left | right else set()  # rank % n, rank + 1
        if isinstance(node, ast.IfExp):
            return k(node.body) | k(node.orelse)
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(self._mentions_cuda(o) for o in operands):
                return {TEST}
            return set()
        if isinstance(node, ast.BoolOp):
            return {TEST} if any(TEST in k(v) for v in node.values) else set()
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return {TEST} if TEST in k(node.operand) else set()
        if isinstance(node, ast.Call):
            func = qualname(node.func, self.aliases)
            if func == "torch.cuda.current_device":
                return {INDEX}
            if is_env_lookup(node, self.aliases):
                return {INDEX}
            if func in ("int", "str") and node.args:
                inner = k(node.args[0])
                if is_env_lookup(node.args[0], self.aliases):
                    inner.add(INDEX)
                return inner & {INDEX}
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("parse_args", "parse_known_args"):
                return {ARGS}
            return set()
        if isinstance(node, ast.Subscript):
            if is_env_lookup(node, self.aliases):
                return {INDEX}
            value = k(node.value)
            return value & {ARGS}  # parse_known_args()[0]
        return set()

    def _mentions_cuda(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str) and bool(CUDA_STRING.match(node.value))
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(self._mentions_cuda(e) for e in node.elts)
        return isinstance(node, ast.Attribute) and node.attr == "is_cuda"

    # -- propagation -------------------------------------------------------------
    def _assign(self, target: ast.AST, kinds: set[str], scope: str) -> bool:
        if not kinds:
            return False
        if isinstance(target, (ast.Tuple, ast.List)):
            return any([self._assign(t, kinds & {ARGS}, scope) for t in target.elts[:1]])
        name = dotted(target)
        return self.flow.add(self.key(name, scope, target.lineno), kinds) if name else False

    def _callee(self, call: ast.Call) -> tuple[bool, str] | None:
        """(started by mp.spawn, the function of this file) that ``call`` passes values to."""
        if call.args and qualname(call.func, self.aliases) in SPAWN:
            target = dotted(call.args[0])
            short = target.split(".")[-1] if target else None
            return (True, short) if short in self.functions else None
        name = dotted(call.func)
        short = name.split(".")[-1] if name else None
        return (False, short) if short in self.functions else None

    def _bind_call(self, call: ast.Call, scope: str, spawned: bool, short: str) -> bool:
        if spawned:
            spawn_args = next((kw.value for kw in call.keywords if kw.arg == "args"), None)
            extra = spawn_args.elts if isinstance(spawn_args, ast.Tuple) else []
            return self._bind(short, [{INDEX}, *(self.kinds(e, scope) for e in extra)], {})
        positional = [self.kinds(a, scope) for a in call.args if not isinstance(a, ast.Starred)]
        keywords = {kw.arg: self.kinds(kw.value, scope) for kw in call.keywords if kw.arg}
        return self._bind(short, positional, keywords)

    def _bind(self, function: str, positional: list[set[str]], keywords: dict[str, set[str]]) -> bool:
        changed = False
        for args in self.functions[function]:
            scope = self.param_scopes.get(id(args), "")
            params = [a.arg for a in (*args.posonlyargs, *args.args)]
            if params and params[0] in ("self", "cls"):
                params = params[1:]
            for param, kinds in zip(params, positional):
                changed |= bool(kinds) and self.flow.add(f"{scope}:{param}", kinds)
            for kw in (*args.args, *args.kwonlyargs):
                if kw.arg in keywords and keywords[kw.arg]:
                    changed |= self.flow.add(f"{scope}:{kw.arg}", keywords[kw.arg])
        return changed

    def run(self) -> DeviceFlow:
        """Propagate kinds until nothing changes; the nodes that can never change anything (a
        loop over no device count, a call of no function of this file) are left out up front."""
        work: list[tuple] = []
        for node in self.facts.nodes:
            scope = self.scope_of.get(id(node), "")
            kind = type(node)
            if kind is ast.Assign or ((kind is ast.AnnAssign or kind is ast.NamedExpr) and node.value is not None):
                work.append((node, scope, None))
            elif kind is ast.For and self._index_loop(node):
                work.append((node, scope, None))
            elif kind is ast.Call:
                callee = self._callee(node)
                if callee is not None:
                    work.append((node, scope, callee))
        for _ in range(MAX_ROUNDS):
            changed = False
            for node, scope, callee in work:
                kind = type(node)
                if kind is ast.Assign:
                    kinds = self.kinds(node.value, scope)
                    for target in node.targets:
                        changed |= self._assign(target, kinds, scope)
                elif kind is ast.For:
                    changed |= self._assign(node.target, {INDEX}, scope)
                elif kind is ast.Call:
                    changed |= self._bind_call(node, scope, *callee)
                else:
                    changed |= self._assign(node.target, self.kinds(node.value, scope), scope)
            if not changed:
                break
        return self.flow

    def _index_loop(self, node: ast.For) -> bool:
        """`for i in range(torch.cuda.device_count())`: i is a device index."""
        it = node.iter
        if isinstance(it, ast.Call) and qualname(it.func, self.aliases) == "range" and it.args:
            bound = it.args[-1] if len(it.args) < 3 else it.args[1]
            return isinstance(bound, ast.Call) and qualname(bound.func, self.aliases) in INDEX_CALLS
        return False


    def record_sites(self, lines: list[str]) -> None:
        """The kinds of every call argument, keyed by (line, character column), for the rules."""
        flow = self.flow

        def key(node: ast.AST) -> tuple[int, int]:
            line = lines[node.lineno - 1] if node.lineno <= len(lines) else ""
            col = node.col_offset
            if not line.isascii():  # ast counts UTF-8 bytes, the rules characters
                col = len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))
            return node.lineno, col

        for node in self.facts.classes:
            if id(node) in self.facts.wrapping or any(qualname(b, self.aliases) in AMP_WRAPPED for b in node.bases):
                flow.amp_wrappers[node.name] = range(node.lineno, (node.end_lineno or node.lineno) + 1)
        for node in self.facts.calls:
            scope = self.scope_of.get(id(node), "")
            for value in (*node.args, *(kw.value for kw in node.keywords)):
                kinds = self.kinds(value, scope)
                if is_env_lookup(value, self.aliases):
                    kinds.add(INDEX)
                if kinds:
                    flow.sites[key(value)] = kinds
            for kw in node.keywords:
                if kw.arg == "fused" and TEST in self.kinds(kw.value, scope):
                    flow.fused_lines.add(kw.value.lineno)
        for call in self.facts.calls:
            if isinstance(call.func, ast.Name) and call.func.id in flow.amp_wrappers \
                    and call.lineno not in flow.amp_wrappers[call.func.id]:
                flow.amp_wrapper_calls.add(call.lineno)
        tested: dict[int, bool] = {}
        for kw, branches in self.facts.fused:  # dict(fused=True) if use_fused else dict()
            for branch in branches:
                if id(branch) not in tested:
                    tested[id(branch)] = TEST in self.kinds(branch.test, self.scope_of.get(id(branch), ""))
                if tested[id(branch)]:
                    flow.fused_lines.add(kw.value.lineno)
                    break


#: every name a kind starts from (`is_cuda`, `torch.cuda.*`, `mp.spawn`, `parse_args`) and every
#: string value (`"cuda"`, `"cuda:N"`, an environment key) holds one of these
SOURCE_WORDS = ("cuda", "spawn", "start_processes", "parse_args", "parse_known_args", *INDEX_ENV)
#: an argparse option holds a device index only where an `add_argument` call declares it
#: (FlowFacts' index options): its words ("gpu", in many docstrings) count only then
DECLARES_OPTIONS = "add_argument"
OPTION_WORDS = tuple(option.replace("_", sep) for option in INDEX_OPTIONS for sep in "_-")
#: the values a string literal must equal or start with to start a kind: spelled in pieces
#: (`"cu" "da"`) its first piece is a proper prefix of one of them, closed by a quote, and the
#: next token is another string (after spaces, comments, line continuations: the parser joins
#: only adjacent literals). A short string on its own (`open(path, "r")`, `"d"`) is no piece.
_VALUES = ("cuda:", *INDEX_ENV)
_OPTION_VALUES = tuple(f"{dashes}{word}" for word in OPTION_WORDS for dashes in ("", "--"))


def _pieces(values) -> re.Pattern:
    prefixes = "|".join(sorted({re.escape(v[:n]) for v in values for n in range(1, len(v))}))
    return re.compile("[\"'](?:%s)[\"'](?:\\s|\\\\(?:\r\n|\r|\n)|#[^\r\n]*)*[rRbBuUfF]{0,2}[\"']" % prefixes)


_PIECE = _pieces(_VALUES)
_OPTION_PIECE = _pieces(_OPTION_VALUES)
#: a backslash that may spell a letter inside a string (`"\x63uda"`) or continue it on the next line
_ESCAPE = re.compile(r"\\(?:[xuUN0-7\r\n])")


def may_flow(text: str) -> bool:
    """Whether the data flow can find anything in ``text``: a file that holds none of the words
    and values that start a kind has no kinds, no sites, no fused lines and no AMP wrappers, and
    its flow is empty without walking its tree (most files of a large package say no `cuda`)."""
    if any(mentions(text, word) for word in SOURCE_WORDS) or _PIECE.search(text) is not None \
            or _ESCAPE.search(text) is not None:
        return True
    return mentions(text, DECLARES_OPTIONS) and (any(mentions(text, word) for word in OPTION_WORDS)
                                                 or _OPTION_PIECE.search(text) is not None)


def device_flow(tree: ast.Module, aliases: dict[str, str], lines: list[str], text: str | None = None) -> DeviceFlow:
    """``text`` (the file's): an empty flow when it cannot find anything (may_flow)."""
    if text is not None and not may_flow(text):
        return DeviceFlow()
    analysis = _Flow(tree, aliases)
    analysis.run()
    analysis.record_sites(lines)
    return analysis.flow
