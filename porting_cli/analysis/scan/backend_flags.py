"""cuDNN and TF32 switches under `torch.backends.cudnn` / `torch.backends.cuda`."""

from __future__ import annotations

import ast

from .base import ReferenceFamily
from .nodes import is_name

TF32_MATMUL = "torch.backends.cuda.matmul.allow_tf32"
TF32_CUDNN = "torch.backends.cudnn.allow_tf32"


class BackendFlagsVisitor(ReferenceFamily):
    family = "backend-flags"
    triggers = (r"cudnn", r"tf32", r"backends\.cuda")

    def on_reference(self, node, qn: str) -> None:
        if qn == TF32_MATMUL:
            self._tf32(node)
        elif qn == TF32_CUDNN:
            self.report(node, "NC402", detail="this one switches TF32 for convolutions")
        elif qn.startswith("torch.backends.cudnn.") or qn == "torch.backends.cudnn":
            self.report(node, "NC401", detail=f"`{qn}`")
        elif qn.startswith("torch.backends.cuda.") or qn == "torch.backends.cuda":
            self.report(node, "NC403", detail=f"`{qn}`")

    def _tf32(self, node: ast.expr) -> None:
        line = self.ctx.sole_assign.get(id(node))
        if line is None:
            self.report(node, "NC402")
            return

        def edit(view) -> str:
            value = line.value
            if is_name(value, "True") or is_name(value, "False"):
                precision = '"high"' if is_name(value, "True") else '"highest"'
            else:
                precision = f'"high" if {_value_text(view, line)} else "highest"'
            return f"torch.set_float32_matmul_precision({precision})"
        self.report(node, "NC402", edit=edit, edit_node=line)


def _value_text(view, assign: ast.Assign) -> str:
    """The code after ``=`` (parentheses included), edits made."""
    text = view.source_text.text
    _, target_end = view.span(assign.targets[0])
    _, end = view.span(assign)
    start = text.index("=", target_end) + 1
    while text[start] in " \t\\\r\n":
        start += 1
    return view.between(start, end)
