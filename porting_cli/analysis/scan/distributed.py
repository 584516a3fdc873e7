"""torch.distributed: the NCCL backend, NCCL-only c10d arguments, DataParallel.

DDP's `device_ids=[rank]` / `output_device=rank` is not reported: DDP takes them for any
single-device module and reads the device type from the module's parameters, so they hold on an
accelerator as on CUDA. Only a CPU module must pass None, and the fixes make the device "the
accelerator, else the CPU": so a file that gets fixes also gets `device_ids=[rank] if
torch.accelerator.is_available() else None`, an edit with no finding of its own.
"""

from __future__ import annotations

import ast

from .base import GUARD, ReferenceFamily
from .nodes import is_name

NCCL_API = ("torch.distributed.is_nccl_available", "torch.distributed.ProcessGroupNCCL",
            "torch.cuda.nccl")
DATA_PARALLEL = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                           "torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.DataParallel",
                           "torch.nn.parallel.data_parallel.data_parallel"})

DDP = frozenset({"torch.nn.parallel.DistributedDataParallel",
                 "torch.nn.parallel.distributed.DistributedDataParallel"})

#: c10d call -> the keyword arguments only its NCCL process group takes
NCCL_ONLY_ARGUMENTS = {"torch.distributed.barrier": ("device_ids",),
                       "torch.distributed.distributed_c10d.barrier": ("device_ids",)}


class DistributedVisitor(ReferenceFamily):
    family = "distributed"
    triggers = (r"nccl", r"NCCL", r"device_ids", r"barrier", r"output_device", r"DataParallel", r"data_parallel",
                r"apex")
    claims = ("torch.cuda.nccl",)

    def visit_String(self, node: ast.Constant) -> None:
        value = node.value
        if "nccl" not in value:
            return
        if value == "nccl" and id(node) not in self.ctx.compared:
            self.report(node, "NC501", edit=lambda _: (
                f"torch.distributed.get_default_backend_for_device({self.ctx.device()})"))
        elif value == "nccl" or (":nccl" in value and "," in value):  # "cuda:nccl,cpu:gloo"
            self.report(node, "NC501")

    def visit_Call(self, node: ast.Call) -> None:
        callee = self.ctx.qualname(node.func)
        if callee in NCCL_ONLY_ARGUMENTS:
            for arg in node.keywords:
                if arg.arg in NCCL_ONLY_ARGUMENTS[callee] and not is_name(arg.value, "None"):
                    self.report(arg, "NC506", detail=f"`{arg.arg}` of `{callee}`")
        elif callee in DDP:
            for arg in node.keywords:
                value = arg.value
                if arg.arg not in ("device_ids", "output_device") or is_name(value, "None") or (
                        isinstance(value, ast.IfExp) and is_name(value.orelse, "None")):  # already guarded
                    continue
                self.companion_edit(value, lambda view, value=value: f"{view.text(value)} if {GUARD} else None")

    def on_reference(self, node, qn: str) -> None:
        if qn.startswith(NCCL_API):
            self.report(node, "NC502", detail=f"`{qn}`")
        elif qn in DATA_PARALLEL:
            self.report(node, "NC504", detail=f"`{qn}`")
        elif qn.startswith("apex.parallel."):
            self.report(node, "NC505", detail=f"`{qn}`")
