"""Custom CUDA extensions, Triton kernels and CUDA-only libraries."""

from __future__ import annotations

import ast

from .base import ReferenceFamily
from .guards import Guards
from .nodes import is_name, keyword

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
    triggers = (r"cpp_extension", r"CUDAExtension", r"cuda_sources", r"triton", r"nvtx", r"cupy",
                *(lib.replace(".", r"\.") for lib in LIBRARIES))

    def __init__(self, ctx):
        super().__init__(ctx)
        self.optional_depth = 0  # inside `try:` blocks whose handlers catch ImportError
        self._guards: Guards | None = None

    def optional(self, node: ast.AST) -> bool:
        """The import is behind a try/except ImportError or an availability guard."""
        if self.optional_depth:
            return True
        if self._guards is None:
            self._guards = Guards(self.ctx.tree, self.ctx.aliases)
        return self._guards.covers(node.lineno)

    # -- imports -------------------------------------------------------------
    def _import(self, node: ast.AST, name: str) -> bool:
        lib = _library(name)
        if lib is None:
            return False
        part = next((p for p in APEX_PARTS if name == p or name.startswith(p + ".")), None)
        if self.optional(node):
            self.report(node, "NC705", detail=f"`{lib}`")
        elif part is not None:
            self.report(node, APEX_PARTS[part], detail=f"`{name}`")
        elif lib == "triton":
            self.report(node, "NC702", detail="`import triton`")
        else:
            rule = "NC704" if lib in NO_REPLACEMENT else "NC703"
            self.report(node, rule, detail=f"`{lib}`: {LIBRARIES[lib]}")
        return True

    def visit_Try(self, node: ast.Try) -> None:
        if any(self._guards_import(h) for h in node.handlers):
            self.optional_depth += 1

    def leave_Try(self, node: ast.Try) -> None:
        if any(self._guards_import(h) for h in node.handlers):
            self.optional_depth -= 1

    def _guards_import(self, handler: ast.ExceptHandler) -> bool:
        kind = handler.type
        if kind is None:
            return True
        names = kind.elts if isinstance(kind, ast.Tuple) else [kind]
        return any(self.ctx.qualname(n) in IMPORT_GUARDS for n in names)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._import(alias, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            return
        name = node.module or ""
        names = [a for a in node.names if a.name != "*"]
        if name == "apex" and names:  # from apex import amp, optimizers
            for alias in names:
                self._import(alias, f"apex.{alias.name}")
            return
        if self._import(node, name):
            return
        for alias in names:  # from numba import cuda
            if self._import(alias, f"{name}.{alias.name}"):
                return

    # -- uses ----------------------------------------------------------------
    def visit_Decorator(self, node: ast.expr) -> None:
        target = node.func if isinstance(node, ast.Call) else node
        qn = self.ctx.qualname(target)
        if qn in TRITON_DECORATORS:
            start, _ = self.ctx.source.span(node)
            text = self.ctx.source.text
            at = text.rfind("@", 0, start)  # the finding starts at the "@"
            self.report(node, "NC702", detail=f"`@{qn}`", start=at if at >= 0 else None)

    def on_reference(self, node, qn: str) -> None:
        if qn in (f"{CPP_EXT}.CUDAExtension", f"{CPP_EXT}.CUDA_HOME"):
            self.report(node, "NC701", detail=f"`{qn}`")
        elif qn in (f"{CPP_EXT}.load", f"{CPP_EXT}.load_inline"):
            call = self.call_of(node)
            if call is not None and self._builds_cuda(call):
                self.report(node, "NC701", detail=f"`{qn}` with CUDA sources")

    def _builds_cuda(self, call: ast.Call) -> bool:
        if keyword(call, "cuda_sources") or keyword(call, "extra_cuda_cflags"):
            return True
        with_cuda = keyword(call, "with_cuda")
        if with_cuda is not None and is_name(with_cuda.value, "True"):
            return True
        strings = self.ctx.strings
        for node in _code_nodes(call):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if any(value and value.endswith((".cu", ".cuh")) for value, _, _ in strings.pieces(node)):
                    return True
        return False


def _code_nodes(node: ast.AST):
    """The nodes under ``node``, leaving out the text of f-strings (which holds no literal)."""
    todo = [node]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.JoinedStr):
            todo.extend(v for v in node.values if isinstance(v, ast.FormattedValue))
        else:
            todo.extend(ast.iter_child_nodes(node))
