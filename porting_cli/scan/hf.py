"""Hugging Face: `device_map` pinned to CUDA."""

from __future__ import annotations

import libcst as cst

from .base import FamilyVisitor, int_value, string_value
from .device import CUDA_DEVICE


def _device_index(node: cst.BaseExpression) -> tuple[bool, int | None]:
    """(is a CUDA device, index) for a device_map value or dict value."""
    n = int_value(node)
    if n is not None:
        return True, n
    value = string_value(node)
    if value is not None:
        m = CUDA_DEVICE.match(value)
        if m:
            return True, int(m.group(1)) if m.group(1) else None
    return False, None


class HuggingFaceVisitor(FamilyVisitor):
    family = "huggingface"
    triggers = (r"device_map",)

    def visit_Call(self, node: cst.Call) -> None:
        for arg in node.args:
            if arg.keyword is None or arg.keyword.value != "device_map":
                continue
            value = arg.value
            if isinstance(value, cst.Dict):
                entries = [e for e in value.elements if isinstance(e, cst.DictElement)]
                cuda = [_device_index(e.value) for e in entries]
                if not entries or not all(c for c, _ in cuda):
                    continue
                if len(entries) == 1 and string_value(entries[0].key) == "":
                    self._report(arg, cuda[0][1])
                else:
                    self.report(arg, "NC901")
            else:
                is_cuda, index = _device_index(value)
                if is_cuda:
                    self._report(arg, index)

    def _report(self, arg: cst.Arg, index: int | None) -> None:
        ctx = self.ctx
        self.report(arg, "NC901", edit_node=arg.value, edit=lambda _: (
            ctx.device() if index is None else ctx.indexed_device(cst.Integer(str(index)))))
