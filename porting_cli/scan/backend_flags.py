"""cuDNN and TF32 switches under `torch.backends.cudnn` / `torch.backends.cuda`."""

from __future__ import annotations

import libcst as cst

from .base import ReferenceFamily, expr

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

    def _tf32(self, node: cst.BaseExpression) -> None:
        found = self.ctx.sole_assign.get(id(node))
        if found is None:
            self.report(node, "NC402")
            return
        line, _ = found

        def edit(updated: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
            value = updated.body[0].value
            if isinstance(value, cst.Name) and value.value in ("True", "False"):
                precision = cst.SimpleString('"high"' if value.value == "True" else '"highest"')
            else:
                precision = cst.IfExp(test=value, body=cst.SimpleString('"high"'),
                                      orelse=cst.SimpleString('"highest"'))
            call = cst.Call(func=expr("torch.set_float32_matmul_precision"), args=[cst.Arg(precision)])
            return updated.with_changes(body=[cst.Expr(call)])
        self.report(node, "NC402", edit=edit, edit_node=line)
