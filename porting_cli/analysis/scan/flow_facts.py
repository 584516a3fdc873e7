"""The one walk of a file's ``ast`` tree that the data flow (porting_cli/analysis/scan/dataflow.py) needs.

It records, in a single pass: the scope of every node (the function it is in, ignoring classes
as the alias map does), the names each scope binds, the targets of ``for`` loops, the parameters
of the file's functions and classes, the ``argparse`` options that hold a device index, the
nodes the propagation looks at (assignments, loops, calls), the classes whose code creates a
``torch.cuda.amp`` object, and each ``fused=`` keyword with the ``if`` branches around it.
Decorators and annotations belong to no scope (they read as module code).
"""

from __future__ import annotations

import ast

from .nodes import child_fields, qualname

INDEX_OPTIONS = frozenset({"gpu", "gpu_id", "local_rank", "gpu_index", "device_id", "cuda_device"})
AMP_WRAPPED = ("torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler",
               "torch.cuda.amp.autocast")
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
FLOW_NODES = (ast.Assign, ast.AnnAssign, ast.For, ast.Call, ast.NamedExpr)


class FlowFacts:
    def __init__(self, tree: ast.Module, aliases: dict[str, str]):
        self.aliases = aliases
        self.functions: dict[str, list[ast.arguments]] = {}
        self.index_dests: set[str] = set()
        self.scope_of: dict[int, str] = {}             # id(flow node or If) -> its function ("" = module)
        self.locals: dict[str, set[str]] = {"": set()}  # scope -> names bound in it
        self.loops: dict[tuple[str, str], list[tuple[int, int, str]]] = {}  # loop targets: (start, end, key)
        self.param_scopes: dict[int, str] = {}          # id(function arguments) -> its scope
        self.nodes: list[ast.AST] = []                  # what the propagation looks at
        self.calls: list[ast.Call] = []
        self.classes: list[ast.ClassDef] = []
        self.wrapping: set[int] = set()                 # ids of classes whose code creates AMP_WRAPPED
        self.fused: list[tuple[ast.keyword, tuple[ast.AST, ...]]] = []  # fused= and the branches around it
        self._class_stack: list[ast.ClassDef] = []
        self._branches: list[ast.AST] = []              # the If / IfExp whose body the walk is in
        self._children(tree, "")

    def _children(self, node: ast.AST, scope: str) -> None:
        for field in child_fields(type(node)):  # no Load/Store/operator leaves: nothing to record
            value = getattr(node, field)
            if type(value) is list:
                for child in value:
                    if isinstance(child, ast.AST):
                        self._node(child, scope)
            elif isinstance(value, ast.AST):
                self._node(value, scope)

    def _node(self, child: ast.AST, scope: str) -> None:
        """Record the scope of a node, the names each function binds, loop targets, and the
        nodes the propagation and the call sites need."""
        kind = type(child)
        if kind in FLOW_NODES:
            self.scope_of[id(child)] = scope
            self.nodes.append(child)
            if kind is ast.Call:
                self._call(child)
        if kind in FUNCTIONS:
            self._function(child, scope)
            return
        if kind is ast.Assign or kind is ast.AnnAssign or kind is ast.AugAssign:
            for target in getattr(child, "targets", None) or [child.target]:
                if type(target) is ast.Name:
                    self.locals[scope].add(target.id)
                elif type(target) is ast.Attribute and type(target.value) is ast.Name:  # self.x = ...
                    self.locals[scope].add(target.value.id)
                else:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            self.locals[scope].add(name.id)
        elif kind is ast.For and isinstance(child.target, ast.Name):
            key = f"{scope}:{child.target.id}@{child.lineno}"
            self.loops.setdefault((scope, child.target.id), []).append(
                (child.lineno, child.end_lineno or child.lineno, key))
        elif kind is ast.ClassDef:
            self.classes.append(child)
            for item in child.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    self.functions.setdefault(child.name, []).append(item.args)
            self._class_stack.append(child)
            self._children(child, scope)
            self._class_stack.pop()
            return
        elif kind is ast.If or kind is ast.IfExp:
            self._branch(child, scope)
            return
        elif kind is ast.keyword and child.arg == "fused":
            self.fused.append((child, tuple(self._branches)))
        self._children(child, scope)

    def _call(self, call: ast.Call) -> None:
        self.calls.append(call)
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "add_argument":
            self._argparse_option(call)
        if self._class_stack and qualname(func, self.aliases) in AMP_WRAPPED:
            self.wrapping.update(id(c) for c in self._class_stack)

    def _function(self, child: ast.AST, scope: str) -> None:
        inner = f"{scope}/{getattr(child, 'name', 'lambda')}@{child.lineno}"
        args = child.args
        if not isinstance(child, ast.Lambda):
            self.functions.setdefault(child.name, []).append(args)
        self.param_scopes[id(args)] = inner
        self.locals[inner] = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        for default in (*args.defaults, *args.kw_defaults):
            if default is not None:
                self._node(default, scope)
        for part in (child.body if isinstance(child.body, list) else [child.body]):
            self._node(part, inner)
        # decorators, annotations: code with no scope of its own (read as the module's)
        for extra in (*getattr(child, "decorator_list", ()), getattr(child, "returns", None),
                      *(a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                               args.vararg, args.kwarg) if a is not None)):
            if extra is not None:
                self._unscoped(extra)

    def _unscoped(self, node: ast.AST) -> None:
        """Collect from code that no scope records (it reads as module code)."""
        kind = type(node)
        if kind in FLOW_NODES:
            self.nodes.append(node)
            if kind is ast.Call:
                self._call(node)
        if kind is ast.keyword and node.arg == "fused":
            self.fused.append((node, tuple(self._branches)))
        for child in ast.iter_child_nodes(node):
            self._unscoped(child)

    def _branch(self, node: ast.If | ast.IfExp, scope: str) -> None:
        """An If / IfExp: its body is code decided by its test."""
        self.scope_of[id(node)] = scope
        self._node(node.test, scope)
        self._branches.append(node)
        for part in (node.body if isinstance(node.body, list) else [node.body]):
            self._node(part, scope)
        self._branches.pop()
        for part in (node.orelse if isinstance(node.orelse, list) else [node.orelse]):
            self._node(part, scope)

    def _argparse_option(self, call: ast.Call) -> None:
        dest = None
        for kw in call.keywords:
            if kw.arg == "dest" and isinstance(kw.value, ast.Constant):
                dest = kw.value.value
        for arg in call.args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                dest = dest or arg.value[2:].replace("-", "_")
        if isinstance(dest, str) and dest in INDEX_OPTIONS:
            self.index_dests.add(dest)
