"""Custom CUDA extensions, Triton kernels and CUDA-only libraries."""

from __future__ import annotations

import ast
import re

from .base import ReferenceFamily
from .guards import Guards
from .libraries import Library, installed_evidence, known, library_for
from .library_apis import LibraryApi, api_for, api_names, method_api
from .triton_sites import TritonSites
from .nodes import is_name, keyword

CPP_EXT = "torch.utils.cpp_extension"
TRITON_DECORATORS = frozenset({"triton.jit", "torch.library.triton_op", "torch.library.wrap_triton"})

#: apex sub-packages that another rule family reports
APEX_PARTS = {"apex.amp": "NC305", "apex.parallel": "NC505"}
#: exceptions whose handler makes an import optional (the script has a fallback)
IMPORT_GUARDS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


#: the rule of each kind of library (porting_cli/analysis/scan/cuda_libraries.json); `fallback`: none
KIND_RULE = {"blocks": "NC704", "replacement": "NC703", "triton": "NC702"}


def _library(name: str) -> Library | None:
    found = library_for(name)
    return found if found is not None and found.kind in KIND_RULE else None


class KernelsVisitor(ReferenceFamily):
    family = "kernels"
    triggers = (r"cpp_extension", r"CUDAExtension", r"cuda_sources", r"triton", r"nvtx", r"cupy", r"\]\(", r"nvidia", r"nvml",
                *(re.escape(name) for name in known()), *(re.escape(name) for name in api_names()), r"\bimport\b")

    def __init__(self, ctx):
        super().__init__(ctx)
        self.optional_depth = 0  # inside `try:` blocks whose handlers catch ImportError
        self._guards: Guards | None = None
        self._triton_sites: TritonSites | None = None

    def optional(self, node: ast.AST, library: str = "") -> bool:
        """The import is behind a try/except ImportError or an availability guard."""
        if self.optional_depth:
            return True
        guards = self.guards()
        nested = any(first < node.lineno <= last for first, last in self._function_lines)
        return guards.covers(node.lineno, library, nested)

    def guards(self) -> Guards:
        if self._guards is None:
            self._guards = Guards(self.ctx.tree, self.ctx.aliases)
            self._function_lines = [(f.lineno, f.end_lineno or f.lineno) for f in ast.walk(self.ctx.tree)
                                    if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        return self._guards

    # -- imports -------------------------------------------------------------
    def _import(self, node: ast.AST, name: str) -> bool:
        lib = _library(name)
        if lib is None:
            self._unknown(node, name)
            return False
        part = next((p for p in APEX_PARTS if name == p or name.startswith(p + ".")), None)
        if self.optional(node, lib.name):
            self.report(node, "NC705", detail=f"`{lib.name}`")
        elif part is not None:
            self.report(node, APEX_PARTS[part], detail=f"`{name}`")
        elif lib.kind == "triton":
            self.report(node, "NC702", detail=f"`import {lib.name}`")
        else:
            self.report(node, KIND_RULE[lib.kind], detail=f"`{lib.name}`: {lib.advice}{self._evidence(lib.name)}")
        return True

    def _evidence(self, name: str) -> str:
        """The installed distribution's CUDA evidence, when the package is installed."""
        found = installed_evidence(name.split(".")[0])
        if found is None:
            return ""
        return f" (installed: {'; '.join(found)})" if found else " (installed: no CUDA evidence in its files)"

    def _unknown(self, node: ast.AST, name: str) -> None:
        """A third-party import the data does not know: its installed files decide."""
        top = name.split(".")[0]
        if not top or library_for(top) is not None:
            return
        found = installed_evidence(top)
        if found:
            rule = "NC705" if self.optional(node) else "NC706"
            self.report(node, rule, detail=f"`{top}`: {'; '.join(found)}")

    def visit_Try(self, node: ast.Try) -> None:
        if any(self._guards_import(h) for h in node.handlers):
            self.optional_depth += 1

    def leave_Try(self, node: ast.Try) -> None:
        if any(self._guards_import(h) for h in node.handlers):
            self.optional_depth -= 1

    def _guards_import(self, handler: ast.ExceptHandler) -> bool:
        """The handler catches a failed import and carries on; one that raises again (`raise
        ImportError("pip install bitsandbytes")`) or exits is no fallback."""
        if any(isinstance(stmt, ast.Raise) or _exits(stmt) for stmt in handler.body):
            return False
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
        for alias in names:  # from lightning.fabric.plugins import BitsandbytesPrecision
            self._api_named(alias, api_for(f"{name}.{alias.name}"))
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

    def _triton(self) -> TritonSites:
        if self._triton_sites is None:
            self._triton_sites = TritonSites(self.ctx.tree, self.ctx.aliases, self.ctx.source.text)
        return self._triton_sites

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute):  # pipe.enable_xformers_memory_efficient_attention()
            api = method_api(node.func.attr)
            if api is not None:
                self._api_call(node.func, api, start=self.attr_start(node.func))
        if isinstance(node.func, ast.Subscript) and self._triton().is_launch(node):
            self.report(node, "NC702", detail="launch of a Triton kernel")
        elif isinstance(node.func, ast.Subscript) and self._triton().is_imported_launch(node):
            self.report(node, "NC999", detail="launch of a Triton kernel another module defines")

    def _library_use(self, node, qn: str) -> None:
        """A use of a name a CUDA-only library's import bound (`flash_attn_func(...)`,
        `xformers.ops.memory_efficient_attention(...)`); the body of a Triton kernel is one change
        with its decorator."""
        lib = _library(qn)
        if lib is None or qn.startswith(tuple(APEX_PARTS)):
            return
        if lib.kind == "triton":
            if not self._triton().in_kernel(node.lineno) and self.call_of(node) is not None:
                self.report(node, "NC702", detail=f"`{qn}`")
            return
        rule = "NC705" if self.optional(node, lib.name) else KIND_RULE[lib.kind]
        self.report(node, rule, detail=f"`{lib.name}`: use of `{qn}`")

    # -- APIs of other packages that need a CUDA-only library (cuda_library_apis.json) ----------
    def _api_named(self, node: ast.AST, api: LibraryApi | None) -> bool:
        """NC707 where the API is named without being called (an import, a base class)."""
        lib = _library(api.requires) if api is not None else None
        if lib is None:
            return False
        self.report(node, "NC707", detail=f"`{api.name}` needs `{lib.name}`")
        return True

    def _api_call(self, node: ast.AST, api: LibraryApi, start: int | None = None) -> None:
        """The library's own rule where the API is called; NC705 inside an availability guard
        (a guarded block only: the file checking for the library elsewhere does not make this
        call optional)."""
        lib = _library(api.requires)
        if lib is None:
            return
        if self.optional_depth or self.guards().covers(node.lineno, lib.name, nested=False):
            rule = "NC705"
        else:
            rule = "NC702" if lib.kind == "triton" else KIND_RULE[lib.kind]
        self.report(node, rule, start=start,
                    detail=f"`{lib.name}` through `{api.name}`: {lib.advice}{self._evidence(lib.name)}")

    def on_reference(self, node, qn: str) -> None:
        api = api_for(qn)
        if api is not None:
            if self.call_of(node) is not None:  # at the API's name: `L.fabric.plugins.BitsandbytesPrecision(`
                self._api_call(node, api, start=self.attr_start(node) if isinstance(node, ast.Attribute) else None)
            else:
                self._api_named(node, api)
        self._library_use(node, qn)
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


def _exits(stmt: ast.stmt) -> bool:
    """`sys.exit(...)`, `exit()`, `quit()`, `os._exit(...)` as a statement."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("exit", "quit", "_exit")


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
