"""Device placement: `.cuda()`, "cuda" device strings, integer devices (the CUDA tensor types are
porting_cli/analysis/scan/legacy_types.py's).

A "cuda" string is only reported where it is used as a device: an argument of
`.to()` / `torch.device()` / `torch.set_default_device()`, a `device=` /
`map_location=` / `device_type=` keyword, an assignment, a return value, a
parameter default, an argparse `default=`, or a comparison. A log message that
mentions CUDA is not a device.
"""

from __future__ import annotations

import ast
import re

from .base import ReferenceFamily, guarded
from .dataflow import INDEX
from .calls import rebuilt_call
from .nodes import call_arguments, int_value, keyword, positional

CUDA_DEVICE = re.compile(r"cuda(?::(\d+))?\Z")
#: string methods that handle a device as text; "cuda" / "cuda:" as their argument (NC110)
TEXT_METHODS = frozenset({"replace", "startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip",
                          "find", "rfind", "index", "partition", "removeprefix", "count"})
CUDA_TEXT = re.compile(r"cuda(?::\d*)?\Z", re.IGNORECASE)

#: calls whose first positional argument is a device
DEVICE_FIRST_ARG = frozenset({"torch.set_default_device", "torch.Generator", "torch.Stream"})
#: calls whose first positional argument is a device *type* string
TYPE_FIRST_ARG = frozenset({
    "torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast",
    "torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler", "torch.get_device_module",
})
DEVICE_KEYWORDS = frozenset({"device", "map_location"})
TYPE_KEYWORDS = frozenset({"device_type"})


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class DevicePlacementVisitor(ReferenceFamily):
    family = "device"
    triggers = (r"cuda", r"device\s*=\s*\d", r"\.to\(\s*\d", r"fused")

    # -- what an expression evaluates to ---------------------------------------
    def built_strings(self, node: ast.AST):
        """Device strings built from "cuda": `f"cuda:{i}"`, `"cuda:" + str(i)`, `"cuda:%d" % i`,
        `"cuda:{}".format(i)` (looking through conditional expressions)."""
        if isinstance(node, ast.IfExp):
            yield from self.built_strings(node.body)
            yield from self.built_strings(node.orelse)
        elif isinstance(node, ast.JoinedStr) and self.ctx.strings.is_fstring(node):
            first = node.values[0] if node.values else None
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            if isinstance(first, ast.Constant) and str(first.value).startswith("cuda:") and len(node.values) > 1 \
                    and not any(c.isspace() for c in text.strip()):  # not f"cuda:{i} is out of memory"
                yield node
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
            value = self.ctx.string_value(node.left)
            if value is not None and (value == "cuda" or value.startswith("cuda:")):
                yield node
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            value = self.ctx.string_value(node.func.value)
            if value is not None and value.startswith("cuda:"):
                yield node

    def device_strings(self, node: ast.AST):
        """(string node, index or None) for each "cuda"/"cuda:N" literal that ``node``
        evaluates to (looking through conditional expressions)."""
        if isinstance(node, ast.IfExp):
            yield from self.device_strings(node.body)
            yield from self.device_strings(node.orelse)
            return
        value = self.ctx.folded_value(node)  # "cuda", f"cuda", "cu" + "da", "cuda:%d" % 0
        if value is not None:
            m = CUDA_DEVICE.match(value)
            if m:
                yield node, (int(m.group(1)) if m.group(1) is not None else None)

    # -- edits -----------------------------------------------------------------
    def _as_device(self, index: int | None):
        ctx = self.ctx
        if index is None:
            return lambda _: ctx.device()
        return lambda _: ctx.indexed_device(str(index))

    def _as_type(self, index: int | None):
        return lambda _: self.ctx.device_type()

    def _as_value(self, index: int | None):
        """A device kept in a variable stays a string: "cuda" -> DEVICE.type."""
        ctx = self.ctx
        if index is None:
            return lambda _: ctx.device_type()
        return lambda _: f'f"{{{ctx.device()}.type}}:{index}"'

    def _strings(self, node: ast.AST, make_edit) -> None:
        for string, index in self.device_strings(node):
            if id(string) not in self.ctx.handled:
                self.report(string, "NC102", edit=make_edit(index))
        for built in self.built_strings(node):
            if id(built) not in self.ctx.handled:
                self.report(built, "NC107", edit=lambda view, built=built: self._fix_built(view, built))

    def _typed_prefix(self, text_node: ast.AST, bare: bool) -> str:
        """"cuda:REST" -> (DEVICE.type + ":REST")."""
        rest = (self.ctx.string_value(text_node) or "cuda")[len("cuda"):]
        device_type = self.ctx.device_type()
        if not rest:
            return device_type
        code = f"{device_type} + {_quoted(rest)}"
        return code if bare else f"({code})"

    def _fix_built(self, view, node: ast.AST) -> str:
        start, end = view.span(node)
        if isinstance(node, ast.JoinedStr):
            text = view.between(start, end)
            cut = len(text) - len(text.lstrip("rRfF"))
            quote = 3 if text[cut:cut + 3] in ('"""', "'''") else 1
            at = cut + quote
            return view.keep_parens(node, text[:at] + "{" + self.ctx.device_type() + "}" + text[at + len("cuda"):])
        part = node.left if isinstance(node, ast.BinOp) else node.func.value
        p_start, p_end = view.outer(part)
        bare = isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
        code = view.between(start, p_start) + self._typed_prefix(part, bare) + view.between(p_end, end)
        return view.keep_parens(node, code)

    def _index_expression(self, node: ast.AST) -> bool:
        """An integer device index: a literal, or a value the data flow traced to one."""
        return int_value(node) is not None or INDEX in self.ctx.kinds_of(node)

    # `within` is the `torch.device(index)` call the index is the argument of: the edit replaces
    # that call, so the fixed code is `torch.device(DEVICE.type, i)`, never a device in a device
    def _flowed_index(self, node: ast.AST, within: ast.Call | None = None) -> None:
        if int_value(node) is None and INDEX in self.ctx.kinds_of(node) and id(node) not in self.ctx.handled:
            if isinstance(node, ast.Call) and self.ctx.qualname(node.func) == "torch.cuda.current_device":
                # one edit per node: this one also does NC203's (the index of the accelerator)
                index = guarded("torch.accelerator.current_device_index()", "0")
                self.report(node, "NC106", edit=lambda _: self.ctx.indexed_device(index), edit_node=within)
                return
            if self.ctx.torch.integer_device_is_accelerator:
                self._accelerator_index(node, f"`{self.ctx.source.text[slice(*self.ctx.source.span(node))]}`")
                return
            self.report(node, "NC106", edit=lambda view: self.ctx.indexed_device(view.text(node)), edit_node=within)

    def _integer(self, node: ast.AST, within: ast.Call | None = None) -> None:
        n = int_value(node)
        if n is not None and id(node) not in self.ctx.handled:
            if self.ctx.torch.integer_device_is_accelerator:
                self._accelerator_index(node, f"`{n}`")
                return
            self.report(node, "NC104", edit=lambda _: self.ctx.indexed_device(str(n)), edit_node=within)

    def _accelerator_index(self, node: ast.AST, what: str) -> None:
        """On a torch where an integer device is the current accelerator's: information, no fix."""
        self.report(node, "NC111", detail=f"{what} on the installed {self.ctx.torch.describe()}")

    # -- visits ----------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        method = func.attr if isinstance(func, ast.Attribute) else None
        qn = self.ctx.qualname(func)
        args = positional(node)
        if method == "cuda" and self.ctx.qualname(func.value) != "torch":
            given = args[0] if args else (keyword(node, "device") or None)
            value = given.value if isinstance(given, ast.keyword) else given
            as_index = given is None or self._index_expression(value)
            self.report(node, "NC101", edit=lambda view: self._fix_cuda_method(view, node, given, as_index),
                        start=self.attr_start(func))
        elif qn == "torch.device" and args:
            self._torch_device(node, args)
        elif method == "to" and args:
            self._strings(args[0], self._as_device)
            self._integer(args[0])
            self._flowed_index(args[0])
        elif qn in TYPE_FIRST_ARG and args:
            self._strings(args[0], self._as_type)
        elif qn in DEVICE_FIRST_ARG and args:
            self._strings(args[0], self._as_device)
        elif method in TEXT_METHODS:
            for arg in args:
                text = self.ctx.string_value(arg)
                if text is not None and CUDA_TEXT.match(text) and id(arg) not in self.ctx.handled:
                    self.report(arg, "NC110", detail=f"`.{method}({text!r})`")
        for arg in node.keywords:
            name = arg.arg
            if name is None:
                continue
            if name in DEVICE_KEYWORDS:
                self._strings(arg.value, self._as_device)
                if name == "map_location" and isinstance(arg.value, ast.Dict):
                    for value in arg.value.values:  # the saved locations (keys) stay as they are
                        self._strings(value, self._as_value)
                if name == "device":
                    # `torch.device(device=0)`: the edit replaces the whole call, never a device
                    # in a device (`torch.device(device=torch.device(DEVICE.type, 0))`)
                    whole = node if qn == "torch.device" and len(node.keywords) == 1 and not args else None
                    self._integer(arg.value, within=whole)
                    self._flowed_index(arg.value, within=whole)
            elif name == "fused" and arg.lineno in self.ctx.flow.fused_lines:
                self.report(arg, "NC109")
            elif name in TYPE_KEYWORDS:
                self._strings(arg.value, self._as_type)
            elif name == "default" and method == "add_argument":
                self._strings(arg.value, self._as_value)

    def _torch_device(self, node: ast.Call, args: list[ast.expr]) -> None:
        first = args[0]
        found = list(self.device_strings(first))
        if found and found[0][0] is first:
            index = found[0][1]
            if len(args) == 1 and index is None:
                edit = lambda _: self.ctx.device()  # noqa: E731
            else:
                def edit(view, index=index):
                    rest = [str(index)] if index is not None else [view.text(a) for a in args[1:2]]
                    return self.ctx.indexed_device(rest[0]) if rest else self.ctx.device()
            self.report(first, "NC102", edit=edit, edit_node=node)
        else:
            self._strings(first, self._as_type)
            self._integer(first, within=node if len(args) == 1 else None)
            if len(args) == 1:
                self._flowed_index(first, within=node)

    def _fix_cuda_method(self, view, node: ast.Call, given: ast.AST | None, as_index: bool) -> str:
        """`.cuda(i)` -> `.to(torch.device(DEVICE.type, i))` for an index; any other argument (a
        torch.device, a "cuda:0" string, a value of unknown kind) goes through the prelude's
        `device_for`, which maps CUDA devices to the accelerator and keeps the index."""
        if given is None:
            target = self.ctx.device()
        else:
            value = view.text(given.value if isinstance(given, ast.keyword) else given)
            target = self.ctx.indexed_device(value) if as_index else self.ctx.helper("device_for", value)
        return rebuilt_call(view, node, ".to", [target], [a for a in call_arguments(node) if a is not given])

    def visit_Assign(self, node: ast.Assign) -> None:
        self._strings(node.value, self._as_value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._strings(node.value, self._as_value)

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self._strings(node.value, self._as_value)

    def visit_arguments(self, node: ast.arguments) -> None:
        for default in (*node.defaults, *node.kw_defaults):
            if default is not None:
                self._strings(default, self._as_value)

    def visit_Compare(self, node: ast.Compare) -> None:
        for operand in (node.left, *node.comparators):
            members = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
            for member in members:  # device_type in ("cuda", "xpu")
                for string, index in self.device_strings(member):
                    if id(string) not in self.ctx.handled:
                        self.report(string, "NC103", edit=self._as_tested_type(index))

    def _as_tested_type(self, index: int | None):
        """"cuda" in a test -> DEVICE_TYPE: the same answer on CUDA and on a CPU-only machine,
        and the accelerator's answer on any other accelerator."""
        ctx = self.ctx
        if index is None:
            return lambda _: ctx.tested_type()
        return lambda _: f'f"{{{ctx.tested_type()}}}:{index}"'

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "is_cuda" and self.call_of(node) is None:
            self.report(node, "NC108", edit=lambda view: self._fix_is_cuda(view, node), start=self.attr_start(node))

    def _fix_is_cuda(self, view, node: ast.Attribute) -> str:
        text = view.between(*view.span(node))
        value = text[:len(text) - len("is_cuda")].rstrip().removesuffix(".").rstrip()
        return f"({value}.device.type == {self.ctx.tested_type()})"
