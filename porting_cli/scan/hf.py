"""Hugging Face: `device_map` pinned to CUDA."""

from __future__ import annotations

import ast

from .base import FamilyVisitor
from .device import CUDA_DEVICE
from .nodes import int_value


class HuggingFaceVisitor(FamilyVisitor):
    family = "huggingface"
    triggers = (r"device_map",)

    def _device_index(self, node: ast.AST) -> tuple[bool, int | None]:
        """(is a CUDA device, index) for a device_map value or dict value."""
        n = int_value(node)
        if n is not None:
            return True, n
        value = self.ctx.string_value(node)
        if value is not None:
            m = CUDA_DEVICE.match(value)
            if m:
                return True, int(m.group(1)) if m.group(1) else None
        return False, None

    def visit_Call(self, node: ast.Call) -> None:
        for arg in node.keywords:
            if arg.arg != "device_map":
                continue
            value = arg.value
            if isinstance(value, ast.Dict):
                entries = [(k, v) for k, v in zip(value.keys, value.values) if k is not None]  # not **spread
                cuda = [self._device_index(v) for _, v in entries]
                if not entries or not all(c for c, _ in cuda):
                    continue
                if len(entries) == 1 and self.ctx.string_value(entries[0][0]) == "":
                    self._report(arg, cuda[0][1])
                else:
                    self.report(arg, "NC901")
            else:
                is_cuda, index = self._device_index(value)
                if is_cuda:
                    self._report(arg, index)

    def _report(self, arg: ast.keyword, index: int | None) -> None:
        ctx = self.ctx
        self.report(arg, "NC901", edit_node=arg.value, edit=lambda _: (
            ctx.device() if index is None else ctx.indexed_device(str(index))))
