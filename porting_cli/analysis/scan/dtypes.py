"""64-bit floating point, which Trainium does not have."""

from __future__ import annotations

import ast

from .base import ReferenceFamily
from .nodes import positional

FLOAT64 = frozenset({"torch.float64", "torch.double", "torch.complex128", "torch.cdouble"})


class Float64Visitor(ReferenceFamily):
    family = "dtype"
    triggers = (r"float64", r"double", r"complex128")

    def on_reference(self, node, qn: str) -> None:
        if qn in FLOAT64:
            self.report(node, "NC801", detail=f"`{qn}`")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "double" and not positional(node) \
                and self.ctx.qualname(func.value) != "torch":
            self.report(node, "NC802")
