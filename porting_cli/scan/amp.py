"""Automatic mixed precision: `torch.cuda.amp` -> `torch.amp` with a device type."""

from __future__ import annotations

import libcst as cst

from .base import FamilyVisitor, ReferenceFamily, expr

AUTOCAST = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
SCALER = frozenset({"torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"})
#: positional parameters of torch.cuda.amp.autocast, which torch.amp.autocast takes in another order
AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")


def module_name(node: cst.BaseExpression | None) -> str:
    if node is None:
        return ""
    return cst.Module([]).code_for_node(node)


class AmpVisitor(ReferenceFamily):
    family = "amp"
    triggers = (r"cuda", r"apex")
    claims = ("torch.cuda.amp",)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Name) and func.value in self.ctx.flow.amp_wrappers \
                and self.ctx.line_of(node) in self.ctx.flow.amp_wrapper_calls:
            self.report(node, "NC306", detail=f"`{func.value}`")

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
            rename = isinstance(node, cst.Attribute)
            new_name = "torch.amp.autocast" if qn in AUTOCAST else "torch.amp.GradScaler"
            self.report(node, rule, edit_node=call,
                        edit=lambda c: self._fix_call(c, new_name if rename else None, qn in AUTOCAST))
        elif qn != "torch.cuda.amp":
            self.report(node, "NC304", detail=f"`{qn}`")

    def _fix_call(self, updated: cst.Call, new_name: str | None, autocast: bool) -> cst.Call:
        args = []
        for i, arg in enumerate(updated.args):
            if autocast and arg.keyword is None and not arg.star and i < len(AUTOCAST_POSITIONAL):
                arg = arg.with_changes(keyword=cst.Name(AUTOCAST_POSITIONAL[i]),
                                       equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                             whitespace_after=cst.SimpleWhitespace("")))
            args.append(arg)
        first = cst.Arg(self.ctx.device_type(), comma=cst.MaybeSentinel.DEFAULT)
        if args:
            first = first.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        func = expr(new_name) if new_name else updated.func
        return updated.with_changes(func=func, args=[first, *args])


class AmpImportVisitor(FamilyVisitor):
    """`from torch.cuda.amp import autocast` / `import torch.cuda.amp` (rule NC303)."""

    family = "amp"
    triggers = (r"cuda",)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative:
            return
        name = module_name(node.module)
        names = node.names if not isinstance(node.names, cst.ImportStar) else ()
        if name == "torch.cuda.amp" or name.startswith("torch.cuda.amp."):
            new = "torch.amp" + name[len("torch.cuda.amp"):]
            self.report(node, "NC303", edit=lambda n: n.with_changes(module=expr(new)))
        elif name == "torch.cuda" and any(a.name.value == "amp" for a in names
                                          if isinstance(a.name, cst.Name)):
            if len(names) == 1:
                self.report(node, "NC303", edit=lambda n: n.with_changes(module=expr("torch")))
            else:
                self.report(node, "NC303")

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = module_name(alias.name)
            if name == "torch.cuda.amp" or name.startswith("torch.cuda.amp."):
                self.report(alias, "NC303", detail="`import torch.amp` (and use `torch.amp.*`)")
