"""Environment variables that only CUDA and NCCL read."""

from __future__ import annotations

import ast

from .base import FamilyVisitor

CUDA_ENV = frozenset({"CUDA_LAUNCH_BLOCKING", "PYTORCH_CUDA_ALLOC_CONF", "CUDA_DEVICE_ORDER",
                      "TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDA_PATH", "CUDA_MODULE_LOADING"})


class EnvironmentVisitor(FamilyVisitor):
    family = "environment"
    triggers = (r"CUDA", r"NCCL_")

    def visit_String(self, node: ast.Constant) -> None:
        value = node.value
        if value == "CUDA_VISIBLE_DEVICES":
            self.report(node, "NC911")
        elif value in CUDA_ENV or (value.startswith("NCCL_") and value.isupper()):
            self.report(node, "NC912", detail=f"`{value}`")
