"""The `sim` torch.compile backend: AOTAutograd graphs that run on sim kernels.

``torch.compile(fn, backend="sim")`` traces `fn` with dynamo, lowers it through AOTAutograd
(so the graphs the backend compiler sees are aten-level, forward and backward, as a real
backend's are), then runs every node of those graphs through the sim device. A compiled graph
therefore meets the same profile as eager code (unsupported ops and dtypes, CPU fallbacks,
faults), and `compile_faults` on top while a graph runs. A graph that calls one of the
profile's `compile_unsupported_ops` is refused at lowering (`CompileUnsupported`), as a real
backend compiler refuses an op it has no lowering for.

AOTAutograd unwraps sim tensors before tracing: the graph it hands over computes on the CPU
tensors that sim tensors hold. The runner wraps its inputs back into sim tensors, maps the
CPU device the trace recorded back to sim, and unwraps the outputs for AOTAutograd to wrap.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import torch

from . import faults
from .faults import DEVICE

BACKEND_NAME = DEVICE
_CPU = torch.device("cpu")
_SIM = torch.device(DEVICE, 0)


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

    stays_sim = _outputs_on_sim(gm)

    def run(args: list) -> list:
        sim_args = [_to_sim(a) for a in args]
        args.clear()  # boxed convention: the runner owns (and may free) its inputs
        with faults.in_compiled_graph():
            outs = _SimInterpreter(gm).run(*sim_args)
        return [o if keep else _to_inner(o) for o, keep in zip(outs, stays_sim)]

    run._boxed_call = True
    return run


def _outputs_on_sim(gm: torch.fx.GraphModule) -> list[bool]:
    """Per graph output: did the trace see a sim tensor there? Outputs computed from sim
    tensors' CPU insides were traced as CPU tensors, and AOTAutograd wraps them back; a tensor
    a factory made on sim (a cache a model allocates on first use) was traced as sim and must
    leave the graph as one."""
    output = next(node for node in gm.graph.nodes if node.op == "output")
    values = output.args[0] if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
    found = []
    for value in values:
        meta = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
        found.append(isinstance(meta, torch.Tensor) and meta.device.type == DEVICE)
    return found


class _SimInterpreter(torch.fx.Interpreter):
    """Runs each aten node on sim tensors: the device's kernels, profile included."""

    def call_function(self, target, args, kwargs):
        args, kwargs = torch.utils._pytree.tree_map(_cpu_device_to_sim, (args, kwargs))
        from torch._higher_order_ops.effects import with_effects

        if target is with_effects:  # an effectful op threaded on a token: run the op itself on sim
            token, op, *rest = args
            out = op(*rest, **kwargs)
            return (token, *out) if isinstance(out, tuple) else (token, out)
        return super().call_function(target, args, kwargs)

    def get_attr(self, target, args, kwargs):
        # A constant the trace lifted out of the graph holds the CPU inside of a sim tensor.
        return _to_sim(super().get_attr(target, args, kwargs))


def _cpu_device_to_sim(x):
    return _SIM if isinstance(x, torch.device) and x.type == "cpu" else x


def _to_sim(x):
    from .tensor import SimTensor

    if isinstance(x, torch.Tensor) and not isinstance(x, SimTensor) and x.device == _CPU:
        return SimTensor(x, requires_grad=False)
    return x


def _to_inner(x):
    from .tensor import SimTensor

    return x._cpu if isinstance(x, SimTensor) else x


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
