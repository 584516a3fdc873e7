"""The legacy CUDA tensor types (`torch.cuda.FloatTensor` and kin) and the default tensor type, as
the installed torch has them.

Measured on torch 2.13 (its CPU build, and with sim registered):

- `torch.cuda.FloatTensor(...)` raises `TypeError: type torch.cuda.FloatTensor not available.
  Torch not compiled with CUDA enabled.`; on CUDA it warns that the `torch.cuda.*DtypeTensor`
  constructors are no longer recommended (from the torch 2.1 development builds on: the warning is
  what vllm-project/vllm#1123 and NVIDIA/apex#1754 removed);
- `x.type(torch.cuda.FloatTensor)` moves `x` to CUDA, and raises without it;
- `isinstance(x, torch.cuda.FloatTensor)` is False for a tensor on any other device: a sim tensor's
  `x.type()` is the PrivateUse1 backend's FloatTensor, so the test silently takes its other branch;
- `torch.set_default_tensor_type(t)` is deprecated since torch 2.1 (its UserWarning; the plan in
  pytorch/pytorch#99521, the docs in #115041), and with a CUDA type it raises without CUDA; its
  replacement, `torch.set_default_dtype(dtype)` and `torch.set_default_device(device)`, makes
  `torch.ones(1)` a float32 tensor on sim; the legacy constructor `torch.Tensor(...)` ignores the
  default device (a CPU tensor under `set_default_device("meta")`), so a file that calls it keeps
  its finding unfixed.
"""

from __future__ import annotations

import ast

from .base import ReferenceFamily
from .nodes import positional

TYPE_DTYPES = {"Float": "torch.float32", "Double": "torch.float64", "Half": "torch.float16",
               "BFloat16": "torch.bfloat16", "Long": "torch.int64", "Int": "torch.int32",
               "Short": "torch.int16", "Char": "torch.int8", "Byte": "torch.uint8", "Bool": "torch.bool"}
TENSOR_TYPES = {f"torch.cuda.{t}Tensor": dtype for t, dtype in TYPE_DTYPES.items()}
#: the types `set_default_tensor_type` takes: floating ones only
FLOATING = frozenset(f"torch.cuda.{t}Tensor" for t in ("Float", "Double", "Half", "BFloat16"))

CONSTRUCTOR = "on {}, the constructor raises `TypeError` without CUDA, and on CUDA warns that it is no " \
              "longer recommended; use `torch.tensor(data, dtype={}, device=device)` / `torch.empty(size, ...)`"
CONVERSION = "on {1}, `.type({0})` moves the tensor to CUDA and raises without CUDA; use `.to(device, {2})`"
INSTANCE_TEST = "on {2}, `isinstance(x, {0})` is False for a tensor on any other accelerator (its `x.type()` " \
                "is the backend's `{1}`, not CUDA's): test `x.device.type` and `x.dtype` instead"


class LegacyTensorTypesVisitor(ReferenceFamily):
    family = "device"
    triggers = (r"cuda",)
    claims = tuple(TENSOR_TYPES)

    def _type_named(self, node: ast.AST) -> str | None:
        """The CUDA tensor type ``node`` names (a reference, or a string such as 'torch.cuda.FloatTensor')."""
        qn = self.ctx.qualname(node) if isinstance(node, (ast.Name, ast.Attribute)) else self.ctx.string_value(node)
        return qn if qn in TENSOR_TYPES else None

    def visit_Call(self, node: ast.Call) -> None:
        ctx = self.ctx
        func = node.func
        args = positional(node)
        on = ctx.torch.measured()
        qn = ctx.qualname(func)
        if qn in TENSOR_TYPES:
            self.report(func, "NC105", detail=CONSTRUCTOR.format(on, TENSOR_TYPES[qn]))
        elif qn == "torch.set_default_tensor_type" and len(args) == 1 and self._type_named(args[0]):
            self._default_tensor_type(node, args[0], self._type_named(args[0]))
        elif isinstance(func, ast.Attribute) and func.attr == "type" and len(args) == 1 and self._type_named(args[0]):
            named = self._type_named(args[0])
            self.report(args[0], "NC105", detail=CONVERSION.format(named, on, TENSOR_TYPES[named]))
        elif qn == "isinstance" and len(args) == 2:
            tested = args[1].elts if isinstance(args[1], ast.Tuple) else [args[1]]
            for member in tested:
                named = self._type_named(member)
                if named:
                    self.report(member, "NC105", detail=INSTANCE_TEST.format(named, named.rpartition(".")[2], on))

    def _default_tensor_type(self, call: ast.Call, arg: ast.AST, named: str) -> None:
        ctx = self.ctx
        ctx.handled.add(id(arg))
        line = ctx.sole_call_stmt.get(id(call))
        if line is None or named not in FLOATING:
            self.report(call, "NC112", detail=f"`{named}`")
            return
        if self._legacy_constructor_called():
            self.report(call, "NC112", detail=f"`{named}` (not fixed automatically: the file calls `torch.Tensor(...)`, "
                                              "which follows the default tensor type but not the default device)")
            return
        dtype = TENSOR_TYPES[named]

        def edit(view) -> str:
            text = ctx.lines[line.lineno - 1]
            indent = text[:len(text) - len(text.lstrip())]
            return f"torch.set_default_dtype({dtype}){ctx.source.first_newline()}{indent}" \
                   f"torch.set_default_device({ctx.device()})"
        self.report(call, "NC112", detail=f"`{named}`", edit=edit, edit_node=line)

    def _legacy_constructor_called(self) -> bool:
        """`torch.Tensor(...)` is called somewhere in the file: it makes a tensor of the default tensor
        type, so it followed a CUDA default type, but it ignores `torch.set_default_device`
        (measured on torch 2.13: under `set_default_device("meta")` it is still a CPU tensor)."""
        return any(isinstance(n, ast.Call) and self.ctx.qualname(n.func) == "torch.Tensor"
                   for n in ast.walk(self.ctx.tree))

    def on_reference(self, node, qn: str) -> None:
        if qn in TENSOR_TYPES and id(node) not in self.ctx.handled:
            self.report(node, "NC105")
