"""64-bit floating point, which Trainium does not have."""

from __future__ import annotations

import libcst as cst

from .base import ReferenceFamily, positional

FLOAT64 = frozenset({"torch.float64", "torch.double", "torch.complex128", "torch.cdouble"})


class Float64Visitor(ReferenceFamily):
    family = "dtype"
    triggers = (r"float64", r"double", r"complex128")

    def on_reference(self, node, qn: str) -> None:
        if qn in FLOAT64:
            self.report(node, "NC801", detail=f"`{qn}`")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "double" and not positional(node) \
                and self.ctx.qualname(func.value) != "torch":
            self.report(node, "NC802")
