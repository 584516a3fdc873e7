"""First divergent module: where a model's device output first breaks the numerics rule.

Forward hooks on every submodule record its tensor inputs and outputs (copied
to CPU) on the device model, the CPU model in the same dtype and the float64
oracle model. Hooks fire when a module finishes, so children come before
their parents; the first module, in that order, whose output fails the rule
while its inputs passed it is where the error was born (a module whose inputs
already differ merely inherited it). Modules called more than once are keyed
by (name, call number).

MoE routers pick experts with topk: a tiny bf16 difference can swap the
choice and everything after it differs, although each kernel is fine. When
the first divergent module is a router this is reported as a router flip.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.numerics import compare

ROUTER_NAME = re.compile(r"(router|(^|\.)gate$|topk|top_k)", re.IGNORECASE)


@dataclasses.dataclass
class Divergence:
    module: str  # qualified name, e.g. "model.layers.0.mlp.act_fn"
    class_name: str
    reason: str
    router: bool = False
    ops: tuple[str, ...] = ()  # the computing aten overloads it ran itself on the device (not its children)

    @property
    def failing_op(self) -> str | None:
        """The op that produced the wrong value, where the module ran just one: its children passed
        and its inputs were right, so the error was born in what it computed itself."""
        return self.ops[0] if len(self.ops) == 1 else None

    def describe(self) -> str:
        return f"{self.module} ({self.class_name})"

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "ops": list(self.ops)}


@dataclasses.dataclass
class _Call:
    key: tuple[str, int]
    class_name: str
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]
    ops: tuple[str, ...] = ()


# Ops that move or relabel values and compute nothing: never the op that made one wrong.
_COPIES = frozenset({"aten._to_copy.default", "aten.copy_.default", "aten.clone.default", "aten.detach.default",
                     "aten.lift_fresh.default", "aten.contiguous.default", "aten._unsafe_view.default"})


def computes(name: str) -> bool:
    """Whether aten overload `name` computes values (not a view, a copy or a reshape)."""
    if name in _COPIES:
        return False
    namespace, packet, overload = name.split(".", 2)
    try:
        return not getattr(getattr(getattr(torch.ops, namespace), packet), overload).is_view
    except (AttributeError, RuntimeError):
        return True


def _tensors(value: Any) -> list[torch.Tensor]:
    return [leaf.detach().to("cpu") for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]


@contextlib.contextmanager
def recording(model: torch.nn.Module, device_type: str | None = None) -> Iterator[list[_Call]]:
    """Hooks on every submodule of `model`; yields the list of calls in completion order. With
    `device_type`, each call also lists the computing ops it ran itself on that device."""
    calls: list[_Call] = []
    counts: dict[str, int] = {}
    running: list[list[str]] = []  # per module call in progress: the ops it ran itself
    handles = []

    def make_hooks(name: str) -> tuple[Callable, Callable]:
        def before(module, args, kwargs):
            running.append([])

        def after(module, args, kwargs, output):
            own = running.pop() if running else []
            counts[name] = counts.get(name, 0) + 1
            calls.append(_Call((name, counts[name]), type(module).__name__, _tensors((args, kwargs)), _tensors(output),
                               tuple(dict.fromkeys(op for op in own if computes(op)))))
        return before, after

    def ran(op: str, args: Any, kwargs: Any) -> None:
        if running:
            running[-1].append(op)

    for name, module in model.named_modules():
        if name:  # the root's output is what already failed
            before, after = make_hooks(name)
            handles.append(module.register_forward_pre_hook(before, with_kwargs=True))
            handles.append(module.register_forward_hook(after, with_kwargs=True))
    try:
        if device_type is None:
            yield calls
        else:
            from conformance.reference.oprecord import record_ops

            with record_ops(device_type, on_op=ran):
                yield calls
    finally:
        for handle in handles:
            handle.remove()


def is_router(name: str, class_name: str) -> bool:
    return bool(ROUTER_NAME.search(name) or ROUTER_NAME.search(class_name))


def first_divergence(dev_calls: list[_Call], ref_calls: list[_Call], hi_calls: list[_Call]) -> Divergence | None:
    """The first device call whose outputs fail the rule while its inputs pass it."""
    ref_by_key = {c.key: c for c in ref_calls}
    hi_by_key = {c.key: c for c in hi_calls}
    for call in dev_calls:
        ref, hi = ref_by_key.get(call.key), hi_by_key.get(call.key)
        if ref is None:
            continue
        hi_outputs = hi.outputs if hi is not None and len(hi.outputs) == len(ref.outputs) else None
        outputs = compare(call.outputs, ref.outputs, hi_outputs)
        if outputs.ok:
            continue
        hi_inputs = hi.inputs if hi is not None and len(hi.inputs) == len(ref.inputs) else None
        if not compare(call.inputs, ref.inputs, hi_inputs).ok:
            continue
        name = call.key[0] if call.key[1] == 1 else f"{call.key[0]}[call {call.key[1]}]"
        return Divergence(name, call.class_name, outputs.reason, is_router(call.key[0], call.class_name), call.ops)
    return None


def locate(run_dev: Callable[[], Any], dev_model, run_ref: Callable[[], Any], ref_model,
           run_hi: Callable[[], Any] | None = None, hi_model=None, device_type: str | None = None) -> Divergence | None:
    """Rerun the three forwards under hooks and name the first divergent module (and, given the
    device's `device_type`, the ops it ran itself)."""
    with recording(dev_model, device_type) as dev_calls:
        run_dev()
    with recording(ref_model) as ref_calls:
        run_ref()
    hi_calls: list[_Call] = []
    if run_hi is not None and hi_model is not None:
        with recording(hi_model) as hi_calls:
            run_hi()
    return first_divergence(dev_calls, ref_calls, hi_calls)
