"""Environment variables that only CUDA and NCCL read."""

from __future__ import annotations

import libcst as cst

from .base import FamilyVisitor, string_value

CUDA_ENV = frozenset({"CUDA_LAUNCH_BLOCKING", "PYTORCH_CUDA_ALLOC_CONF", "CUDA_DEVICE_ORDER",
                      "TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDA_PATH", "CUDA_MODULE_LOADING"})


class EnvironmentVisitor(FamilyVisitor):
    family = "environment"
    triggers = (r"CUDA", r"NCCL_")

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is None:
            return
        if value == "CUDA_VISIBLE_DEVICES":
            self.report(node, "NC911")
        elif value in CUDA_ENV or (value.startswith("NCCL_") and value.isupper()):
            self.report(node, "NC912", detail=f"`{value}`")
