"""What every rule family shares: the per-file context and the family base class.

Each family is one ``FamilyVisitor`` subclass (TorchFix style) with ``visit_<ast node type>``
handlers; all of them run in one traversal of the standard library's ``ast`` tree
(porting_cli/analysis/scan/traverse.py). Names are resolved through the file's imports
(``from torch.cuda.amp import autocast as ac`` makes ``ac`` mean ``torch.cuda.amp.autocast``)
with a plain alias map, which is good enough for scripts.

A rule that can be fixed registers an *edit*: a function that gets a ``View`` of the file (the
text of any node, with the edits inside it already made) and returns the new code of the node
it was registered on; porting_cli/analysis/scan/apply.py splices the new code into the text.
"""

from __future__ import annotations

import ast
from typing import Callable, ClassVar

from .dataflow import DeviceFlow, dotted
from .findings import Finding
from .nodes import SourceText, Strings, iter_blocks, qualname
from .rules import RULES_BY_ID, prelude_names  # noqa: F401 (re-exported)
from . import torch_semantics
from .torch_semantics import TorchSemantics

# An edit gets the file's porting_cli.analysis.scan.apply.View and returns the node's new text. It is
# not spelled as a Protocol over View: apply.py imports this module, and this one must not
# import apply.py back (tests/test_import_graph.py).
Edit = Callable[..., str]


GUARD = "torch.accelerator.is_available()"


class Context:
    """Per-file state shared by the families of one scan."""

    def __init__(self, path: str, source: SourceText, tree: ast.Module, aliases: dict[str, str],
                 device_name: str, flow: DeviceFlow | None = None, skip_lines: frozenset[int] = frozenset(),
                 torch: TorchSemantics | None = None):
        self.path = path
        self.torch = torch or torch_semantics.installed()  # the PyTorch whose semantics the rules state
        self.source = source
        self.lines = source.lines
        self.tree = tree
        self.aliases = aliases
        self.device_name = device_name  # the module-level name the fixes bind the device to
        self.flow = flow or DeviceFlow()
        self.skip_lines = skip_lines      # neuron-check's own prelude in a fixed file: never reported
        self.value_aliases: frozenset[str] = frozenset()  # names bound to a torch API by code, not imports
        self.prelude: set[str] = set()    # the prelude parts the edits use (see porting_cli.analysis.fix)
        self.findings: list[Finding] = []
        self.strings = Strings(source)
        self.edits: dict[int, tuple[ast.AST, Edit]] = {}
        self.edit_owner: dict[int, Finding] = {}        # id(edited node) -> the finding it fixes
        self.companions: dict[int, tuple[ast.AST, Edit]] = {}  # edits other fixes need (see companion_edit)
        self.fstrings: list[ast.JoinedStr] = []         # f-strings seen (an edit inside one minds its quotes)
        self.call_of: dict[int, ast.Call] = {}          # id(call.func) -> call
        self.sole_call_stmt: dict[int, ast.Expr] = {}   # id(call) -> its statement, alone on its line
        self.sole_assign: dict[int, ast.Assign] = {}    # id(target) -> its assignment, alone on its line
        self.compared: set[int] = set()                 # ids of operands of comparisons
        self.handled: set[int] = set()                  # ids of nodes a rule already reported
        self.inner: set[int] = set()                    # ids of the inner parts of name chains
        self._default_indent: str | None = None

    # -- names and values ------------------------------------------------------
    def qualname(self, node: ast.AST) -> str | None:
        return qualname(node, self.aliases)

    def string_value(self, node: ast.AST | None) -> str | None:
        return None if node is None else self.strings.value(node)

    def folded_value(self, node: ast.AST | None) -> str | None:
        """A plain literal's value, or the value of a string expression of constants."""
        if node is None:
            return None
        value = self.strings.value(node)
        return value if value is not None else self.strings.folded(node)

    def kinds_of(self, node: ast.AST) -> set[str]:
        """What the data flow knows about the value of ``node`` (a call argument)."""
        return self.flow.at(node.lineno, self.source.column(node.lineno, node.col_offset))

    def default_indent(self) -> str:
        """One level of the file's indentation: that of its first indented block (which is in
        the first top-level statement that has one: a block on its header's line holds none)."""
        if self._default_indent is None:
            self._default_indent = "    "
            for stmt in self.tree.body:
                firsts = [block[0].lineno for block in iter_blocks(stmt)]
                if isinstance(stmt, ast.Match):
                    firsts += [case.pattern.lineno for case in stmt.cases]
                outer = _indent(self.lines[stmt.lineno - 1])
                for line in sorted(n for n in firsts if n > stmt.lineno):
                    inner = _indent(self.lines[line - 1])
                    if len(inner) > len(outer) and not self.lines[line - 1][len(inner):].startswith("#"):
                        self._default_indent = inner[len(outer):]
                        return self._default_indent
        return self._default_indent

    # -- fix helpers: code of the replacement ------------------------------------
    def device(self) -> str:
        self.prelude.add("device")
        return self.device_name

    def tested_type(self) -> str:
        """The name of the device type that CUDA tests compare with (see porting_cli.analysis.fix)."""
        self.device()
        self.prelude.add("type")
        return prelude_names(self.device_name)["type"]

    def helper(self, part: str, *args: str) -> str:
        """A call of one of the prelude's helper functions."""
        self.device()
        self.prelude.add(part)
        return f"{prelude_names(self.device_name)[part]}({', '.join(args)})"

    def helper_name(self, part: str) -> str:
        self.device()
        self.prelude.add(part)
        return prelude_names(self.device_name)[part]

    def device_type(self) -> str:
        return f"{self.device()}.type"

    def indexed_device(self, index: str) -> str:
        """``torch.device(DEVICE.type, index)``."""
        return f"torch.device({self.device_type()}, {index})"

    def guarded_statement(self, stmt: ast.stmt, code: str) -> str:
        """``if torch.accelerator.is_available():`` around a statement alone on its line."""
        line = self.lines[stmt.lineno - 1]
        indent = line[:len(line) - len(line.lstrip())]
        step = self.default_indent()
        if "\n" in code or "\r" in code:
            code = _deeper_continuations(code, indent, step)
        return f"if {GUARD}:{self.source.first_newline()}{indent}{step}{code}"


def _deeper_continuations(code: str, indent: str, step: str) -> str:
    """``code`` with each line that continues inside brackets one ``step`` deeper, as a
    statement moved into a new block reads (lines inside a string or after a backslash stay)."""
    import io
    import tokenize

    from .source import split_lines

    lines = split_lines(code)
    bracketed: set[int] = set()  # 0-based lines that start inside brackets
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth -= 1
            elif token.type in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT) and depth > 0:
                bracketed.add(token.end[0])  # the next line (tokenize rows are 1-based)
    except (tokenize.TokenError, IndentationError, SyntaxError):  # pragma: no cover - ast parsed it
        return code
    out = [lines[0]]
    for n, line in enumerate(lines[1:], start=1):
        if n in bracketed and line.strip() and line.startswith(indent):
            line = indent + step + line[len(indent):]
        out.append(line)
    return "".join(out)


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def bound_name(node: ast.AST, names: frozenset[str]) -> str | None:
    """The name of ``names`` a Name/Attribute chain starts with: ``sync`` of ``sync.x``,
    ``self.autocast`` of ``self.autocast``."""
    path = dotted(node)
    if path is None:
        return None
    first, _, rest = path.partition(".")
    head = f"{first}.{rest.split('.')[0]}" if rest else None
    if head in names:
        return head
    return first if first in names else None


def binds(node: ast.AST) -> bool:
    """``node`` is a name being bound or deleted (an assignment, ``for`` or ``with`` target) or a
    parameter: rewriting it would make code that cannot be compiled, or bind another name."""
    return isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)) or isinstance(node, ast.arg)


def guarded(code: str, default: str) -> str:
    """``(call if torch.accelerator.is_available() else default)``."""
    return f"({code} if {GUARD} else {default})"


class FamilyVisitor:
    """Base of one rule family.

    ``triggers`` are regular-expression fragments; a line that matches none of
    the triggers of any family cannot produce a finding (the scanner skips the
    statements made only of such lines). ``claims`` are ``torch.cuda`` names
    that this family reports, so the catch-all rule NC299 leaves them alone.
    """

    family: ClassVar[str] = ""
    triggers: ClassVar[tuple[str, ...]] = ()
    claims: ClassVar[tuple[str, ...]] = ()

    def __init__(self, ctx: Context):
        self.ctx = ctx

    def report(self, node: ast.AST, rule_id: str, detail: str | None = None,
               edit: Edit | Callable | None = None, edit_node: ast.AST | None = None,
               start: int | None = None) -> None:
        """Record a finding at ``node`` (from offset ``start`` when given); ``edit`` (which
        replaces ``edit_node``, default ``node``) makes it fixable."""
        ctx = self.ctx
        rule = RULES_BY_ID[rule_id]
        source = ctx.source
        first, end = source.span(node)
        if start is not None:
            first = start
        line = source.line_of_offset(first)
        if line in ctx.skip_lines:
            return
        end_line = source.line_of_offset(max(end - 1, first))
        text = ctx.lines[line - 1].rstrip("\r\n") if line <= len(ctx.lines) else ""
        message = rule.message if detail is None else f"{rule.message}: {detail}"
        target = node if edit_node is None else edit_node
        if edit is not None and binds(target):  # `self.is_cuda = ...`: a name being bound stays
            edit = None
            message += " (not fixed automatically: the code binds this name)"
        elif edit is not None and bound_name(node, ctx.value_aliases) is not None:
            name = bound_name(node, ctx.value_aliases)
            edit = None
            message += f" (through `{name}`, a name the code binds to `{ctx.aliases[name]}`: not fixed automatically)"
        fixable = edit is not None and id(target) not in ctx.edits
        finding = Finding(
            rule_id=rule.id, path=ctx.path, line=line, col=first - source.starts[line - 1] + 1,
            end_line=end_line, end_col=end - source.starts[end_line - 1] + 1, source_line=text,
            severity=rule.severity, effort=rule.effort, message=message,
            fixable=fixable, family=rule.family)
        if fixable:
            ctx.edits[id(target)] = (target, edit)
            ctx.edit_owner[id(target)] = finding
        ctx.handled.add(id(node))
        ctx.findings.append(finding)

    def companion_edit(self, node: ast.AST, edit: Edit | Callable) -> None:
        """An edit with no finding of its own: what the other fixes need for the fixed file to
        run on the CPU fallback of their device expression (DDP's `device_ids`, which a CPU
        module must not pass). Applied only to a file that has fixes of its own."""
        self.ctx.companions.setdefault(id(node), (node, edit))

    def attr_start(self, node: ast.Attribute) -> int:
        """The offset of the attribute's name (``cuda`` of ``make(...).cuda``): where its finding
        starts, on the line of the CUDA token however long the expression before it."""
        _, end = self.ctx.source.span(node)
        return end - len(node.attr)

    def call_of(self, node: ast.AST) -> ast.Call | None:
        """The call whose callee is ``node``, if any."""
        return self.ctx.call_of.get(id(node))


class ReferenceFamily(FamilyVisitor):
    """A family that reacts to names such as ``torch.cuda.synchronize``.

    The traversal resolves each name chain once and calls ``on_reference`` of every
    reference family (cheaper than each family visiting every Name and Attribute itself).
    """

    def on_reference(self, node: ast.Name | ast.Attribute, qn: str) -> None:
        """A name chain that resolves to ``qn`` (e.g. ``torch.cuda.synchronize``)."""
