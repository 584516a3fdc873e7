"""What every rule family shares: the per-file context and the visitor base.

Each family is one ``FamilyVisitor`` subclass (TorchFix style); all of them run
in one batched libcst traversal. Names are resolved through the file's imports
(``from torch.cuda.amp import autocast as ac`` makes ``ac`` mean
``torch.cuda.amp.autocast``) with a plain alias map, which is much faster than
libcst's scope analysis and good enough for scripts.

A rule that can be fixed registers an *edit*: a function from the updated node
to its replacement, applied by ``porting_cli.fix`` to the node that was flagged.
"""

from __future__ import annotations

import bisect
from typing import Callable, ClassVar

import libcst as cst
from libcst.metadata import PositionProvider

from .dataflow import DeviceFlow
from .model import Finding
from .rules import RULES_BY_ID, prelude_names  # noqa: F401 (re-exported)

Edit = Callable[[cst.CSTNode], cst.CSTNode]


class Context:
    """Per-file state shared by the visitors of one scan."""

    def __init__(self, path: str, lines: list[str], aliases: dict[str, str], device_name: str,
                 flow: DeviceFlow | None = None, skip_lines: frozenset[int] = frozenset()):
        self.path = path
        self.lines = lines
        self.aliases = aliases
        self.device_name = device_name  # the module-level name the fixes bind the device to
        self.flow = flow or DeviceFlow()
        self.skip_lines = skip_lines      # neuron-check's own prelude in a fixed file: never reported
        self.prelude: set[str] = set()    # the prelude parts the edits use (see porting_cli.fix)
        self.findings: list[Finding] = []
        self.positions = None  # PositionProvider's mapping, when the engine resolved it
        # the tree may hold only some chunks of the file: tree line -> file line
        self.chunk_starts = [1]
        self.chunk_offsets = [0]
        self.edits: dict[int, tuple[cst.CSTNode, Edit]] = {}
        self.needs_device = False
        self.import_depth = 0
        self.call_of: dict[int, cst.Call] = {}           # id(call.func) -> call
        self.sole_call_stmt: dict[int, cst.SimpleStatementLine] = {}  # id(call) -> its line
        self.sole_assign: dict[int, tuple[cst.SimpleStatementLine, cst.Assign]] = {}
        self.compared: set[int] = set()                   # ids of operands of comparisons
        self.handled: set[int] = set()                    # ids of nodes a rule already reported
        self._refs: dict[int, str | None] = {}
        self._keep: list[cst.CSTNode] = []                # keeps ids in _refs valid

    def file_line(self, line: int) -> int:
        i = bisect.bisect_right(self.chunk_starts, line) - 1
        return line + self.chunk_offsets[i]

    # -- names -----------------------------------------------------------------
    def qualname(self, expr: cst.BaseExpression) -> str | None:
        """Dotted name of a Name/Attribute chain, through the import aliases."""
        parts: list[str] = []
        while isinstance(expr, cst.Attribute):
            parts.append(expr.attr.value)
            expr = expr.value
        if not isinstance(expr, cst.Name):
            return None
        parts.append(self.aliases.get(expr.value, expr.value))
        return ".".join(reversed(parts))

    def reference(self, node: cst.Name | cst.Attribute) -> str | None:
        """Qualified name if ``node`` is the outermost node of a name chain, else None."""
        key = id(node)
        if key in self._refs:
            return self._refs[key]
        if self.import_depth:
            return None
        qn = self.qualname(node)
        self._refs[key] = qn
        self._keep.append(node)
        inner = node
        while isinstance(inner, cst.Attribute):  # inner parts are not references of their own
            self._refs[id(inner.attr)] = None
            self._refs[id(inner.value)] = None
            self._keep.append(inner)
            inner = inner.value
        return qn

    def kinds_of(self, node: cst.CSTNode) -> set[str]:
        """What the data flow knows about the value of ``node`` (a call argument)."""
        pos = self.positions.get(node) if self.positions is not None else None
        if pos is None:
            return set()
        return self.flow.at(self.file_line(pos.start.line), pos.start.column)

    def line_of(self, node: cst.CSTNode) -> int:
        pos = self.positions.get(node) if self.positions is not None else None
        return self.file_line(pos.start.line) if pos is not None else 0

    # -- fix helpers -----------------------------------------------------------
    def device(self) -> cst.Name:
        self.needs_device = True
        self.prelude.add("device")
        return cst.Name(self.device_name)

    def tested_type(self) -> cst.Name:
        """The name of the device type that CUDA tests compare with (see porting_cli.fix)."""
        self.device()
        self.prelude.add("type")
        return cst.Name(prelude_names(self.device_name)["type"])

    def helper(self, part: str, *args: cst.BaseExpression) -> cst.Call:
        """A call of one of the prelude's helper functions."""
        self.device()
        self.prelude.add(part)
        return cst.Call(func=cst.Name(prelude_names(self.device_name)[part]),
                        args=[cst.Arg(a) for a in args])

    def device_type(self) -> cst.Attribute:
        return cst.Attribute(value=self.device(), attr=cst.Name("type"))

    def indexed_device(self, index: cst.BaseExpression) -> cst.Call:
        """``torch.device(DEVICE.type, index)``."""
        return cst.Call(func=expr("torch.device"), args=[cst.Arg(self.device_type()), cst.Arg(index)])


def expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def string_value(node: cst.CSTNode) -> str | None:
    """The value of a plain string literal, else None."""
    if isinstance(node, cst.SimpleString):
        raw = node.value
        if raw[0] in "'\"" and "\\" not in raw:  # no prefix, no escapes: skip literal_eval
            quote = 3 if raw[:3] in ('"""', "'''") and len(raw) >= 6 else 1
            return raw[quote:-quote]
        try:
            value = node.evaluated_value
        except Exception:  # pragma: no cover - malformed literal
            return None
        return value if isinstance(value, str) else None
    return None


def int_value(node: cst.CSTNode) -> int | None:
    if isinstance(node, cst.Integer):
        try:
            return int(node.evaluated_value)
        except ValueError:  # pragma: no cover
            return None
    return None


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def guarded(call: cst.BaseExpression, default: str) -> cst.IfExp:
    """``(call if torch.accelerator.is_available() else default)``."""
    return cst.IfExp(test=expr("torch.accelerator.is_available()"), body=call, orelse=expr(default),
                     lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def guarded_statement(line: cst.SimpleStatementLine) -> cst.If:
    """``if torch.accelerator.is_available():`` around a one-statement line."""
    inner = line.with_changes(leading_lines=())
    return cst.If(test=expr("torch.accelerator.is_available()"), body=cst.IndentedBlock(body=[inner]),
                  leading_lines=line.leading_lines)


class ContextVisitor(cst.BatchableCSTVisitor):
    """Runs first in the batch and records the structure the rules ask about."""

    def __init__(self, ctx: Context, families=()):
        super().__init__()
        self.ctx = ctx
        self.referrers = [f for f in families if isinstance(f, ReferenceFamily)]

    def visit_Attribute(self, node: cst.Attribute) -> None:
        qn = self.ctx.reference(node)
        if qn:
            for family in self.referrers:
                family.on_reference(node, qn)

    def visit_Name(self, node: cst.Name) -> None:
        qn = self.ctx.reference(node)
        if qn and qn != node.value:  # only imported names can mean a torch API
            for family in self.referrers:
                family.on_reference(node, qn)

    def visit_Import(self, node: cst.Import) -> None:
        self.ctx.import_depth += 1

    def leave_Import(self, original_node: cst.Import) -> None:
        self.ctx.import_depth -= 1

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.ctx.import_depth += 1

    def leave_ImportFrom(self, original_node: cst.ImportFrom) -> None:
        self.ctx.import_depth -= 1

    def visit_Call(self, node: cst.Call) -> None:
        self.ctx.call_of[id(node.func)] = node

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if len(node.body) != 1:
            return
        stmt = node.body[0]
        if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call):
            self.ctx.sole_call_stmt[id(stmt.value)] = node
        elif isinstance(stmt, cst.Assign) and len(stmt.targets) == 1:
            self.ctx.sole_assign[id(stmt.targets[0].target)] = (node, stmt)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self.ctx.compared.add(id(node.left))
        for target in node.comparisons:
            self.ctx.compared.add(id(target.comparator))


class FamilyVisitor(cst.BatchableCSTVisitor):
    """Base of one rule family.

    ``triggers`` are regular-expression fragments; a line that matches none of
    the triggers of any family cannot produce a finding (the scanner skips the
    statements made only of such lines). ``claims`` are ``torch.cuda`` names
    that this family reports, so the catch-all rule NC299 leaves them alone.
    """

    METADATA_DEPENDENCIES = (PositionProvider,)
    family: ClassVar[str] = ""
    triggers: ClassVar[tuple[str, ...]] = ()
    claims: ClassVar[tuple[str, ...]] = ()

    def __init__(self, ctx: Context):
        super().__init__()
        self.ctx = ctx

    def report(self, node: cst.CSTNode, rule_id: str, detail: str | None = None,
               edit: Edit | None = None, edit_node: cst.CSTNode | None = None) -> None:
        """Record a finding at ``node``; ``edit`` (applied to ``edit_node``, default
        ``node``) makes it fixable."""
        ctx = self.ctx
        rule = RULES_BY_ID[rule_id]
        pos = ctx.positions[node] if ctx.positions is not None else self.get_metadata(PositionProvider, node)
        line = ctx.file_line(pos.start.line)
        if line in ctx.skip_lines:
            return
        source = ctx.lines[line - 1].rstrip("\r\n") if line <= len(ctx.lines) else ""
        message = rule.message if detail is None else f"{rule.message}: {detail}"
        target = node if edit_node is None else edit_node
        fixable = edit is not None and id(target) not in ctx.edits
        if fixable:
            ctx.edits[id(target)] = (target, edit)
        ctx.handled.add(id(node))
        ctx.findings.append(Finding(
            rule_id=rule.id, path=ctx.path, line=line, col=pos.start.column + 1,
            end_line=ctx.file_line(pos.end.line), end_col=pos.end.column + 1, source_line=source,
            severity=rule.severity, effort=rule.effort, message=message,
            fixable=fixable, family=rule.family))

    def call_of(self, node: cst.CSTNode) -> cst.Call | None:
        """The call whose callee is ``node``, if any."""
        return self.ctx.call_of.get(id(node))


class ReferenceFamily(FamilyVisitor):
    """A family that reacts to names such as ``torch.cuda.synchronize``.

    The names are resolved once per node by ``ContextVisitor``, which then calls
    ``on_reference`` of every reference family (cheaper than each family
    visiting every Name and Attribute itself).
    """

    def on_reference(self, node: cst.Name | cst.Attribute, qn: str) -> None:
        """A name chain that resolves to ``qn`` (e.g. ``torch.cuda.synchronize``)."""


class Dispatcher(cst.CSTVisitor):
    """Runs many batchable visitors in one traversal, like ``visit_batched`` but
    without its per-attribute hooks (which cost more than the rules here)."""

    def __init__(self, visitors: list[cst.BatchableCSTVisitor]):
        super().__init__()
        visit: dict[str, list] = {}
        leave: dict[str, list] = {}
        for visitor in visitors:
            for name, fn in visitor.get_visitors().items():
                kind, _, node_type = name.partition("_")
                if "_" not in node_type:  # visit_Call, not visit_Call_func
                    (visit if kind == "visit" else leave).setdefault(node_type, []).append(fn)
        self._visit = {k: tuple(v) for k, v in visit.items()}
        self._leave = {k: tuple(v) for k, v in leave.items()}

    def on_visit(self, node: cst.CSTNode) -> bool:
        for fn in self._visit.get(type(node).__name__, ()):
            fn(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        for fn in self._leave.get(type(original_node).__name__, ()):
            fn(original_node)

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass
