"""Where a file defines and launches Triton kernels.

A ``@triton.jit`` function is one change with its decorator: its body (``tl.*`` calls, the
``tl.constexpr`` annotations of its header) is not reported line by line. A launch,
``kernel[grid](...)``, is: the kernel is a ``@triton.jit`` function of the file, or a name bound
from ``triton.JITFunction(...)`` or from a local function that returns a kernel.
"""

from __future__ import annotations

import ast

from .nodes import qualname

JIT = frozenset({"triton.jit", "triton.autotune", "triton.heuristics", "torch.library.triton_op"})


class TritonSites:
    def __init__(self, tree: ast.Module, aliases: dict[str, str]):
        self.bodies: list[tuple[int, int]] = []  # (def line, last line) of each kernel
        kernels: set[str] = set()
        functions: dict[str, ast.AST] = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions[node.name] = node
                for decorator in node.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if qualname(target, aliases) in JIT:
                        kernels.add(node.name)
                        self.bodies.append((node.lineno, node.end_lineno or node.lineno))
                        break
        factories = {name for name, fn in functions.items() if name not in kernels and _makes_kernel(fn, kernels, aliases)}
        self.launchable = set(kernels)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                callee = qualname(node.value.func, aliases) or ""
                if callee == "triton.JITFunction" or callee.split(".")[-1] in factories:
                    self.launchable.update(t.id for t in node.targets if isinstance(t, ast.Name))

    def in_kernel(self, line: int) -> bool:
        return any(first <= line <= last for first, last in self.bodies)

    def is_launch(self, call: ast.Call) -> bool:
        func = call.func
        return isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name) and func.value.id in self.launchable


def _makes_kernel(fn: ast.AST, kernels: set[str], aliases: dict[str, str]) -> bool:
    """``fn`` builds a kernel (calls triton.JITFunction) or returns one of the file's kernels."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and qualname(node.func, aliases) == "triton.JITFunction":
            return True
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Name) and node.value.id in kernels:
            return True
    return False
