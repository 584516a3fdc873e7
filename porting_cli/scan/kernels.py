"""Custom CUDA extensions, Triton kernels and CUDA-only libraries."""

from __future__ import annotations

import libcst as cst

from .amp import module_name
from .base import ReferenceFamily, keyword, string_value

CPP_EXT = "torch.utils.cpp_extension"
TRITON_DECORATORS = frozenset({"triton.jit", "torch.library.triton_op", "torch.library.wrap_triton"})

#: importable name -> advice (NC703 names the library and this advice; NC704 for NO_REPLACEMENT)
LIBRARIES: dict[str, str] = {
    "apex": "use `torch.amp` for apex.amp, `torch.optim.AdamW(fused=True)` or the default "
            "optimizer where the backend has no fused kernel for FusedAdam, "
            "`torch.nn.LayerNorm`/`RMSNorm` for fused norms, DDP for apex.parallel",
    "flash_attn": "use `torch.nn.functional.scaled_dot_product_attention`",
    "xformers": "use `torch.nn.functional.scaled_dot_product_attention` for memory-efficient attention",
    "bitsandbytes": "use a quantisation the backend supports (e.g. torchao, or the backend's own "
                    "int8/fp8 path)",
    "cupy": "use torch tensor operations on the device (or NumPy on CPU)",
    "pynvml": "use `torch.accelerator.memory_allocated()` / `get_memory_info()`",
    "nvidia.dali": "use `torch.utils.data.DataLoader` with CPU decoding",
    "pycuda": "use torch operations or a backend kernel (NKI on Trainium)",
    "numba.cuda": "use torch operations or a backend kernel (NKI on Trainium)",
    "tensorrt": "use `torch.compile` with the backend's compiler",
    "torch_tensorrt": "use `torch.compile` with the backend's compiler",
    "transformer_engine": "use `torch.amp` (FP8 through the backend's own FP8 support)",
    "cudf": "use pandas or torch tensors",
    "mamba_ssm": "use the reference PyTorch implementation of the selective scan",
    "causal_conv1d": "use `torch.nn.functional.conv1d` with causal padding",
    "liger_kernel": "use the PyTorch modules it replaces (Triton kernels)",
    "triton": "",  # reported as NC702
}
#: libraries whose port is new code: their kernels have no PyTorch equivalent to switch to
NO_REPLACEMENT = frozenset({"bitsandbytes", "cupy", "pycuda", "numba.cuda"})
#: apex sub-packages that another rule family reports
APEX_PARTS = {"apex.amp": "NC305", "apex.parallel": "NC505"}
#: exceptions whose handler makes an import optional (the script has a fallback)
IMPORT_GUARDS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _library(name: str) -> str | None:
    for lib in LIBRARIES:
        if name == lib or name.startswith(lib + "."):
            return lib
    return None


class KernelsVisitor(ReferenceFamily):
    family = "kernels"
    triggers = (r"cpp_extension", r"CUDAExtension", r"cuda_sources", r"triton",
                *(lib.replace(".", r"\.") for lib in LIBRARIES))

    def __init__(self, ctx):
        super().__init__(ctx)
        self.optional_depth = 0  # inside `try:` blocks whose handlers catch ImportError

    # -- imports -------------------------------------------------------------
    def _import(self, node: cst.CSTNode, name: str) -> bool:
        lib = _library(name)
        if lib is None:
            return False
        part = next((p for p in APEX_PARTS if name == p or name.startswith(p + ".")), None)
        if self.optional_depth:
            self.report(node, "NC705", detail=f"`{lib}`")
        elif part is not None:
            self.report(node, APEX_PARTS[part], detail=f"`{name}`")
        elif lib == "triton":
            self.report(node, "NC702", detail="`import triton`")
        else:
            rule = "NC704" if lib in NO_REPLACEMENT else "NC703"
            self.report(node, rule, detail=f"`{lib}`: {LIBRARIES[lib]}")
        return True

    def visit_Try(self, node: cst.Try) -> None:
        if any(self._guards_import(h) for h in node.handlers):
            self.optional_depth += 1

    def leave_Try(self, original_node: cst.Try) -> None:
        if any(self._guards_import(h) for h in original_node.handlers):
            self.optional_depth -= 1

    def _guards_import(self, handler: cst.ExceptHandler) -> bool:
        kind = handler.type
        if kind is None:
            return True
        names = [e.value for e in kind.elements] if isinstance(kind, cst.Tuple) else [kind]
        return any(self.ctx.qualname(n) in IMPORT_GUARDS for n in names)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self._import(alias, module_name(alias.name))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative:
            return
        name = module_name(node.module)
        names = [] if isinstance(node.names, cst.ImportStar) else list(node.names)
        if name == "apex" and names:  # from apex import amp, optimizers
            for alias in names:
                self._import(alias, f"apex.{module_name(alias.name)}")
            return
        if self._import(node, name):
            return
        for alias in names:  # from numba import cuda
            if self._import(alias, f"{name}.{module_name(alias.name)}"):
                return

    # -- uses ----------------------------------------------------------------
    def visit_Decorator(self, node: cst.Decorator) -> None:
        target = node.decorator.func if isinstance(node.decorator, cst.Call) else node.decorator
        qn = self.ctx.qualname(target)
        if qn in TRITON_DECORATORS:
            self.report(node, "NC702", detail=f"`@{qn}`")

    def on_reference(self, node, qn: str) -> None:
        if qn in (f"{CPP_EXT}.CUDAExtension", f"{CPP_EXT}.CUDA_HOME"):
            self.report(node, "NC701", detail=f"`{qn}`")
        elif qn in (f"{CPP_EXT}.load", f"{CPP_EXT}.load_inline"):
            call = self.call_of(node)
            if call is not None and self._builds_cuda(call):
                self.report(node, "NC701", detail=f"`{qn}` with CUDA sources")

    @staticmethod
    def _builds_cuda(call: cst.Call) -> bool:
        if keyword(call, "cuda_sources") or keyword(call, "extra_cuda_cflags"):
            return True
        with_cuda = keyword(call, "with_cuda")
        if with_cuda is not None and isinstance(with_cuda.value, cst.Name) and with_cuda.value.value == "True":
            return True
        found = []

        class Sources(cst.CSTVisitor):
            def visit_SimpleString(self, node: cst.SimpleString) -> None:
                value = string_value(node)
                if value and value.endswith((".cu", ".cuh")):
                    found.append(value)
        call.visit(Sources())
        return bool(found)
