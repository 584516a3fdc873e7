"""Device placement: `.cuda()`, "cuda" device strings, integer devices, CUDA tensor types.

A "cuda" string is only reported where it is used as a device: an argument of
`.to()` / `torch.device()` / `torch.set_default_device()`, a `device=` /
`map_location=` / `device_type=` keyword, an assignment, a return value, a
parameter default, an argparse `default=`, or a comparison. A log message that
mentions CUDA is not a device.
"""

from __future__ import annotations

import re

import libcst as cst

from .base import ReferenceFamily, expr, int_value, keyword, positional, string_value
from .dataflow import INDEX

CUDA_DEVICE = re.compile(r"cuda(?::(\d+))?\Z")

#: calls whose first positional argument is a device
DEVICE_FIRST_ARG = frozenset({"torch.set_default_device", "torch.Generator", "torch.Stream"})
#: calls whose first positional argument is a device *type* string
TYPE_FIRST_ARG = frozenset({
    "torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast",
    "torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler", "torch.get_device_module",
})
DEVICE_KEYWORDS = frozenset({"device", "map_location"})
TYPE_KEYWORDS = frozenset({"device_type"})

TENSOR_TYPES = tuple(f"torch.cuda.{t}Tensor" for t in (
    "Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool"))


def built_strings(node: cst.BaseExpression):
    """Device strings built from "cuda": `f"cuda:{i}"`, `"cuda:" + str(i)`, `"cuda:%d" % i`,
    `"cuda:{}".format(i)` (looking through conditional expressions)."""
    if isinstance(node, cst.IfExp):
        yield from built_strings(node.body)
        yield from built_strings(node.orelse)
    elif isinstance(node, cst.FormattedString):
        first = node.parts[0] if node.parts else None
        if isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda:") \
                and len(node.parts) > 1:
            yield node
    elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Modulo)):
        value = string_value(node.left)
        if value is not None and (value == "cuda" or value.startswith("cuda:")):
            yield node
    elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
            and node.func.attr.value == "format":
        value = string_value(node.func.value)
        if value is not None and value.startswith("cuda:"):
            yield node


def device_strings(node: cst.BaseExpression):
    """(string node, index or None) for each "cuda"/"cuda:N" literal that ``node``
    evaluates to (looking through conditional expressions)."""
    if isinstance(node, cst.IfExp):
        yield from device_strings(node.body)
        yield from device_strings(node.orelse)
        return
    value = string_value(node)
    if value is not None:
        m = CUDA_DEVICE.match(value)
        if m:
            yield node, (int(m.group(1)) if m.group(1) is not None else None)


class DevicePlacementVisitor(ReferenceFamily):
    family = "device"
    triggers = (r"cuda", r"device\s*=\s*\d", r"\.to\(\s*\d", r"fused")
    claims = TENSOR_TYPES

    # -- edits -----------------------------------------------------------------
    def _as_device(self, index: int | None):
        ctx = self.ctx
        if index is None:
            return lambda _: ctx.device()
        return lambda _: ctx.indexed_device(cst.Integer(str(index)))

    def _as_type(self, index: int | None):
        return lambda _: self.ctx.device_type()

    def _as_value(self, index: int | None):
        """A device kept in a variable stays a string: "cuda" -> DEVICE.type."""
        ctx = self.ctx
        if index is None:
            return lambda _: ctx.device_type()

        def edit(_):
            ctx.device()
            return expr(f'f"{{{ctx.device_name}.type}}:{index}"')
        return edit

    def _strings(self, node: cst.BaseExpression, make_edit) -> None:
        for string, index in device_strings(node):
            if id(string) not in self.ctx.handled:
                self.report(string, "NC102", edit=make_edit(index))
        for built in built_strings(node):
            if id(built) not in self.ctx.handled:
                self.report(built, "NC107", edit=self._fix_built)

    def _typed_prefix(self, text_node: cst.BaseExpression) -> cst.BaseExpression:
        """"cuda:REST" -> (DEVICE.type + ":REST")."""
        rest = (string_value(text_node) or "cuda")[len("cuda"):]
        device_type = self.ctx.device_type()
        if not rest:
            return device_type
        literal = '"' + rest.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return cst.BinaryOperation(left=device_type, operator=cst.Add(), right=cst.SimpleString(literal),
                                   lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

    def _fix_built(self, updated: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(updated, cst.FormattedString):
            first = updated.parts[0]
            parts = [cst.FormattedStringExpression(expression=self.ctx.device_type()),
                     first.with_changes(value=first.value[len("cuda"):]), *updated.parts[1:]]
            return updated.with_changes(parts=parts)
        if isinstance(updated, cst.BinaryOperation):
            left = self._typed_prefix(updated.left)
            if isinstance(updated.operator, cst.Add):
                left = left.with_changes(lpar=[], rpar=[])
            return updated.with_changes(left=left)
        return updated.with_changes(func=updated.func.with_changes(value=self._typed_prefix(updated.func.value)))

    def _index_expression(self, node: cst.BaseExpression) -> bool:
        """An integer device index: a literal, or a value the data flow traced to one."""
        return int_value(node) is not None or INDEX in self.ctx.kinds_of(node)

    def _flowed_index(self, node: cst.BaseExpression) -> None:
        if int_value(node) is None and INDEX in self.ctx.kinds_of(node) and id(node) not in self.ctx.handled:
            self.report(node, "NC106", edit=lambda updated: self.ctx.indexed_device(updated))

    def _integer(self, node: cst.BaseExpression) -> None:
        n = int_value(node)
        if n is not None and id(node) not in self.ctx.handled:
            self.report(node, "NC104", edit=lambda _: self.ctx.indexed_device(cst.Integer(str(n))))

    # -- visits ----------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        qn = self.ctx.qualname(func)
        args = positional(node)
        if method == "cuda" and self.ctx.qualname(func.value) != "torch":
            given = args[0] if args else keyword(node, "device")
            as_index = given is None or self._index_expression(given.value)
            self.report(node, "NC101", edit=lambda updated: self._fix_cuda_method(updated, as_index))
        elif qn == "torch.device" and args:
            self._torch_device(node, args)
        elif method == "to" and args:
            self._strings(args[0].value, self._as_device)
            self._integer(args[0].value)
            self._flowed_index(args[0].value)
        elif qn in TYPE_FIRST_ARG and args:
            self._strings(args[0].value, self._as_type)
        elif qn in DEVICE_FIRST_ARG and args:
            self._strings(args[0].value, self._as_device)
        for arg in node.args:
            if arg.keyword is None:
                continue
            name = arg.keyword.value
            if name in DEVICE_KEYWORDS:
                self._strings(arg.value, self._as_device)
                if name == "map_location" and isinstance(arg.value, cst.Dict):
                    for element in arg.value.elements:  # the saved locations (keys) stay as they are
                        if isinstance(element, cst.DictElement):
                            self._strings(element.value, self._as_value)
                if name == "device":
                    self._integer(arg.value)
                    self._flowed_index(arg.value)
            elif name == "fused" and self.ctx.line_of(arg) in self.ctx.flow.fused_lines:
                self.report(arg, "NC109")
            elif name in TYPE_KEYWORDS:
                self._strings(arg.value, self._as_type)
            elif name == "default" and method == "add_argument":
                self._strings(arg.value, self._as_value)

    def _torch_device(self, node: cst.Call, args: list[cst.Arg]) -> None:
        first = args[0].value
        found = list(device_strings(first))
        if found and found[0][0] is first:
            index = found[0][1]
            if len(args) == 1 and index is None:
                edit = lambda _: self.ctx.device()  # noqa: E731
            else:
                def edit(updated: cst.Call, index=index):
                    rest = [cst.Integer(str(index))] if index is not None else [a.value for a in positional(updated)[1:2]]
                    return self.ctx.indexed_device(rest[0]) if rest else self.ctx.device()
            self.report(first, "NC102", edit=edit, edit_node=node)
        else:
            self._strings(first, self._as_type)
            self._integer(first)
            if len(args) == 1:
                self._flowed_index(first)

    def _fix_cuda_method(self, updated: cst.Call, as_index: bool) -> cst.Call:
        """`.cuda(i)` -> `.to(torch.device(DEVICE.type, i))` for an index; any other argument (a
        torch.device, a "cuda:0" string, a value of unknown kind) goes through the prelude's
        `device_for`, which maps CUDA devices to the accelerator and keeps the index."""
        args = positional(updated)
        device_kw = keyword(updated, "device")
        index = args[0] if args else device_kw
        if index is None:
            target = self.ctx.device()
        elif as_index:
            target = self.ctx.indexed_device(index.value)
        else:
            target = self.ctx.helper("device_for", index.value)
        rest = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in updated.args if a is not index]
        return updated.with_changes(func=updated.func.with_changes(attr=cst.Name("to")),
                                    args=[cst.Arg(target), *rest])

    def visit_Assign(self, node: cst.Assign) -> None:
        self._strings(node.value, self._as_value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._strings(node.value, self._as_value)

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self._strings(node.value, self._as_value)

    def visit_Param(self, node: cst.Param) -> None:
        if node.default is not None:
            self._strings(node.default, self._as_value)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        for operand in (node.left, *(c.comparator for c in node.comparisons)):
            members = [e.value for e in operand.elements] if isinstance(operand, (cst.Tuple, cst.List, cst.Set)) \
                else [operand]
            for member in members:  # device_type in ("cuda", "xpu")
                for string, index in device_strings(member):
                    if id(string) not in self.ctx.handled:
                        self.report(string, "NC103", edit=self._as_tested_type(index))

    def _as_tested_type(self, index: int | None):
        """"cuda" in a test -> DEVICE_TYPE: the same answer on CUDA and on a CPU-only machine,
        and the accelerator's answer on any other accelerator."""
        ctx = self.ctx
        if index is None:
            return lambda _: ctx.tested_type()

        def edit(_):
            name = ctx.tested_type().value
            return expr(f'f"{{{name}}}:{index}"')
        return edit

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "is_cuda" and self.call_of(node) is None:
            self.report(node, "NC108", edit=lambda updated: cst.Comparison(
                left=cst.Attribute(value=cst.Attribute(value=updated.value, attr=cst.Name("device")),
                                   attr=cst.Name("type")),
                comparisons=[cst.ComparisonTarget(operator=cst.Equal(), comparator=self.ctx.tested_type())],
                lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))

    def on_reference(self, node, qn: str) -> None:
        if qn in TENSOR_TYPES:
            self.report(node, "NC105")
