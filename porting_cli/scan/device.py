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
    triggers = (r"cuda", r"device\s*=\s*\d", r"\.to\(\s*\d")
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
            self.report(node, "NC101", edit=self._fix_cuda_method)
        elif qn == "torch.device" and args:
            self._torch_device(node, args)
        elif method == "to" and args:
            self._strings(args[0].value, self._as_device)
            self._integer(args[0].value)
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
                if name == "device":
                    self._integer(arg.value)
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

    def _fix_cuda_method(self, updated: cst.Call) -> cst.Call:
        args = positional(updated)
        device_kw = keyword(updated, "device")
        index = args[0] if args else device_kw
        target = self.ctx.device() if index is None else self.ctx.indexed_device(index.value)
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
            for string, _ in device_strings(operand):
                if id(string) not in self.ctx.handled:
                    self.report(string, "NC103")

    def on_reference(self, node, qn: str) -> None:
        if qn in TENSOR_TYPES:
            self.report(node, "NC105")
