"""Where a file defines and launches Triton kernels.

A ``@triton.jit`` function is one change with its decorator: its body (``tl.*`` calls, the
``tl.constexpr`` annotations of its header) is not reported line by line. A launch,
``kernel[grid](...)``, is: the kernel is a ``@triton.jit`` function of the file, or a name bound
from ``triton.JITFunction(...)`` or from a local function that returns a kernel; a kernel that
``torch.library.wrap_triton(kernel)[grid](...)`` wraps; or an imported name (``from .ops import
kernel``, ``ops.kernel``) subscripted by something that reads as a launch grid (a tuple, a lambda,
a name or call that says grid or cdiv), since a plain imported function cannot be subscripted
and a table of functions (``ACT2FN[name](x)``) is indexed by a key, not by a grid.
"""

from __future__ import annotations

import ast

from .nodes import module_statements, qualname
from .source import mentions

JIT = frozenset({"triton.jit", "triton.autotune", "triton.heuristics", "torch.library.triton_op"})
WRAPPERS = frozenset({"torch.library.wrap_triton", "torch._higher_order_ops.triton_kernel_wrap.wrap_triton"})


class TritonSites:
    def __init__(self, tree: ast.Module, aliases: dict[str, str], text: str):
        self.tree = tree
        self.bodies: list[tuple[int, int]] = []  # (def line, last line) of each kernel
        self.launchable: set[str] = set()
        self.aliases = aliases
        self._import_names: set[str] | None = None
        # Every name in JIT and WRAPPERS says triton, and a qualified name is spelled from the
        # file's own names: a file that never says it defines, builds and wraps no kernel (the
        # walk below is most of the cost of a file that subscripts a call, `ACT2FN[name](x)`).
        if mentions(text, "triton"):
            self._find_kernels(tree, aliases)

    def _find_kernels(self, tree: ast.Module, aliases: dict[str, str]) -> None:
        kernels: set[str] = set()
        functions: dict[str, ast.AST] = {}
        assigns: list[ast.Assign] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions[node.name] = node
                for decorator in node.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if qualname(target, aliases) in JIT:
                        kernels.add(node.name)
                        self.bodies.append((node.lineno, node.end_lineno or node.lineno))
                        break
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                assigns.append(node)
        factories = {name for name, fn in functions.items() if name not in kernels and _makes_kernel(fn, kernels, aliases)}
        self.launchable = set(kernels)
        for node in assigns:
            callee = qualname(node.value.func, aliases) or ""
            if callee == "triton.JITFunction" or callee.split(".")[-1] in factories:
                self.launchable.update(t.id for t in node.targets if isinstance(t, ast.Name))

    @property
    def imported(self) -> set[str]:
        """Every name an import binds, relative imports (`from .ops import kernel`) included
        (imports are statements: the statement lists hold them all)."""
        if self._import_names is None:
            self._import_names = {(a.asname or a.name).split(".")[0] for n in module_statements(self.tree)
                              if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
        return self._import_names

    def in_kernel(self, line: int) -> bool:
        return any(first <= line <= last for first, last in self.bodies)

    def is_launch(self, call: ast.Call) -> bool:
        """A launch of a kernel this file defines or wraps: the file needs Triton."""
        func = call.func
        if not isinstance(func, ast.Subscript):
            return False
        kernel = func.value
        if isinstance(kernel, ast.Name) and kernel.id in self.launchable:
            return True
        return isinstance(kernel, ast.Call) and qualname(kernel.func, self.aliases) in WRAPPERS

    def is_imported_launch(self, call: ast.Call) -> bool:
        """A launch of a kernel another module defines: CUDA code on this line, but whether the
        port is blocked is that module's to say (it may fall back, as whisper's callers do)."""
        func = call.func
        return isinstance(func, ast.Subscript) and self._imported(func.value) and _reads_as_grid(func.slice)

    def _imported(self, node: ast.AST) -> bool:
        """A name an import bound, or an attribute of an imported module."""
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.imported


def _reads_as_grid(index: ast.AST) -> bool:
    if isinstance(index, (ast.Tuple, ast.Lambda)):
        return True
    words = [n.id for n in ast.walk(index) if isinstance(n, ast.Name)]
    words += [n.attr for n in ast.walk(index) if isinstance(n, ast.Attribute)]
    return any("grid" in w.lower() or w == "cdiv" for w in words)


def _makes_kernel(fn: ast.AST, kernels: set[str], aliases: dict[str, str]) -> bool:
    """``fn`` builds a kernel (calls triton.JITFunction) or returns one of the file's kernels."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and qualname(node.func, aliases) == "triton.JITFunction":
            return True
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Name) and node.value.id in kernels:
            return True
    return False
