"""Automatic mixed precision: `torch.cuda.amp` -> `torch.amp` with a device type."""

from __future__ import annotations

import ast
import re

from .base import FamilyVisitor, ReferenceFamily
from .calls import call_text

AUTOCAST = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
SCALER = frozenset({"torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"})
#: positional parameters of torch.cuda.amp.autocast, which torch.amp.autocast takes in another order
AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")
FROM_MODULE = re.compile(r"from\s+([A-Za-z_][\w]*(?:\s*\.\s*[A-Za-z_]\w*)*)")


class AmpVisitor(ReferenceFamily):
    family = "amp"
    triggers = (r"cuda", r"apex")
    claims = ("torch.cuda.amp",)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.ctx.flow.amp_wrappers \
                and node.lineno in self.ctx.flow.amp_wrapper_calls:
            self.report(node, "NC306", detail=f"`{func.id}`")

    def on_reference(self, node, qn: str) -> None:
        if qn.startswith("apex.amp."):
            self.report(node, "NC305", detail=f"`{qn}`")
            return
        if not qn.startswith("torch.cuda.amp"):
            return
        call = self.call_of(node)
        if qn in AUTOCAST or qn in SCALER:
            rule = "NC301" if qn in AUTOCAST else "NC302"
            if call is None:
                self.report(node, rule)
                return
            # an imported name keeps its name (its import is rewritten to torch.amp)
            rename = isinstance(node, ast.Attribute)
            new_name = "torch.amp.autocast" if qn in AUTOCAST else "torch.amp.GradScaler"
            self.report(node, rule, edit_node=call,
                        edit=lambda view: self._fix_call(view, call, new_name if rename else None, qn in AUTOCAST))
        elif qn != "torch.cuda.amp":
            self.report(node, "NC304", detail=f"`{qn}`")

    def _fix_call(self, view, call: ast.Call, new_name: str | None, autocast: bool) -> str:
        """`torch.cuda.amp.autocast(True)` -> `torch.amp.autocast(DEVICE.type, enabled=True)`: the
        device type goes first and the old positional parameters are named."""
        parts = call_text(view.source_text, call)
        text = view.source_text.text
        out = [new_name if new_name else view.text(call.func), text[parts.func_end:parts.open + 1]]
        first = parts.args[0][1] if parts.args else parts.close
        out.append(text[parts.open + 1:first])
        out.append(self.ctx.device_type())
        if parts.args:
            out.append(", ")
        pos = first
        for i, (arg, start, _) in enumerate(parts.args):
            if autocast and i < len(AUTOCAST_POSITIONAL) and not isinstance(arg, (ast.Starred, ast.keyword)):
                out.append(view.between(pos, start))
                out.append(AUTOCAST_POSITIONAL[i] + "=")
                pos = start
        out.append(view.between(pos, parts.close))
        out.append(")")
        return view.keep_parens(call, "".join(out))


def _module_span(source, node: ast.ImportFrom) -> tuple[int, int]:
    """Offsets of the module name of ``from MODULE import ...``."""
    start, end = source.span(node)
    m = FROM_MODULE.match(source.text, start, end)
    return m.start(1), m.end(1)


class AmpImportVisitor(FamilyVisitor):
    """`from torch.cuda.amp import autocast` / `import torch.cuda.amp` (rule NC303)."""

    family = "amp"
    triggers = (r"cuda",)

    def _new_module(self, node: ast.ImportFrom, module: str):
        def edit(view) -> str:
            start, end = view.span(node)
            m_start, m_end = _module_span(view.source_text, node)
            return view.between(start, m_start) + module + view.between(m_end, end)
        return edit

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            return
        name = node.module or ""
        names = [a for a in node.names if a.name != "*"]
        if name == "torch.cuda.amp" or name.startswith("torch.cuda.amp."):
            self.report(node, "NC303", edit=self._new_module(node, "torch.amp" + name[len("torch.cuda.amp"):]))
        elif name == "torch.cuda" and any(a.name == "amp" for a in names):
            if len(node.names) == 1:
                self.report(node, "NC303", edit=self._new_module(node, "torch"))
            else:
                self.report(node, "NC303")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            name = alias.name
            if name == "torch.cuda.amp" or name.startswith("torch.cuda.amp."):
                self.report(alias, "NC303", detail="`import torch.amp` (and use `torch.amp.*`)")
