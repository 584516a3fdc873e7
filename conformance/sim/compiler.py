"""The `sim` torch.compile backend: AOTAutograd graphs that run on sim kernels.

``torch.compile(fn, backend="sim")`` traces `fn` with dynamo, lowers it through AOTAutograd
(so the graphs the backend compiler sees are aten-level, forward and backward, as a real
backend's are), then runs every node of those graphs through the sim device. A compiled graph
therefore meets the same profile as eager code (unsupported ops and dtypes, CPU fallbacks,
faults), and `compile_faults` on top while a graph runs. A graph that calls one of the
profile's `compile_unsupported_ops` is refused at lowering (`CompileUnsupported`), as a real
backend compiler refuses an op it has no lowering for.

The graphs receive plain sim tensors, as a real backend's compiler receives its device's
tensors, and each node runs through the device's kernels.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import torch

from . import faults
from .faults import DEVICE

BACKEND_NAME = DEVICE


def graph_ops(gm: torch.fx.GraphModule) -> list[str]:
    """The aten overloads (``str(OpOverload)``) called by `gm`, in graph order, deduplicated."""
    seen: dict[str, None] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            seen.setdefault(str(node.target), None)
    return list(seen)


# Graph observers: callables given each lowered graph (the compile-mode runner records
# graph_ops from them). Explicitly registered and removed, never implicit.
_observers: list[Callable[[torch.fx.GraphModule], None]] = []


@contextmanager
def observe_graphs(observer: Callable[[torch.fx.GraphModule], None]) -> Iterator[None]:
    _observers.append(observer)
    try:
        yield
    finally:
        _observers.remove(observer)


class CompileUnsupported(NotImplementedError):
    """The sim backend compiler has no lowering for `refused_op` (profile `compile_unsupported_ops`)."""

    def __init__(self, op: str):
        super().__init__(f"the {DEVICE} compiler has no lowering for {op} (compile_unsupported_ops)")
        self.refused_op = op


def _lower(gm: torch.fx.GraphModule, example_inputs) -> Callable:
    for observer in list(_observers):
        observer(gm)
    profile = faults.active_profile()
    if profile is not None and profile.compile_unsupported_ops:
        for name in graph_ops(gm):
            if profile.is_compile_unsupported_op(name):
                raise CompileUnsupported(name)

    def run(args: list) -> list:
        inputs = list(args)
        args.clear()  # boxed convention: the runner owns (and may free) its inputs
        with faults.in_compiled_graph():
            return _SimInterpreter(gm).run(*inputs)

    run._boxed_call = True
    return run


class _SimInterpreter(torch.fx.Interpreter):
    """Runs each aten node on sim tensors: the device's kernels, profile included."""

    def call_function(self, target, args, kwargs):
        from torch._higher_order_ops.effects import with_effects

        if target is with_effects:  # an effectful op threaded on a token: run the op itself on sim
            token, op, *rest = args
            out = op(*rest, **kwargs)
            return (token, *out) if isinstance(out, tuple) else (token, out)
        return super().call_function(target, args, kwargs)


def sim_backend(gm: torch.fx.GraphModule, example_inputs, **options):
    """The dynamo backend registered as ``"sim"``."""
    from torch._dynamo.backends.common import aot_autograd

    if options:
        raise TypeError(f"the sim compile backend takes no options, got {sorted(options)}")
    return aot_autograd(fw_compiler=_lower, bw_compiler=_lower, inference_compiler=_lower)(
        gm, example_inputs
    )


def register_compile_backend() -> None:
    """Make ``torch.compile(..., backend="sim")`` available (imports dynamo; call lazily)."""
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if BACKEND_NAME not in _COMPILER_FNS:
        register_backend(sim_backend, name=BACKEND_NAME)
