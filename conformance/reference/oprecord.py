"""Record which aten overloads run on a device, and which one raised.

A TorchDispatchMode sees every aten call below autograd, for any backend, so
one recorder serves every suite and the porting trace. Asked to (`keep_calls`), it also
keeps every call with its arguments and outputs, so conformance/reference/replay.py can run the
device's own op sequence again on the CPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode


_OP_NAMES: dict[Any, str] = {}  # str(OpOverload) builds the name anew on every call


def op_name(func: Any) -> str:
    """'aten.mul.Tensor' (a higher-order operator: 'higher_order.flex_attention'): the name
    profiles, results and reports use."""
    name = _OP_NAMES.get(func)
    if name is None:
        name = f"higher_order.{func.name()}" if isinstance(func, torch._ops.HigherOrderOperator) else str(func)
        _OP_NAMES[func] = name
    return name


def call_leaves(*trees: Any) -> list:
    """pytree.tree_leaves(trees), walking plain lists, tuples and dicts itself: an aten call's
    arguments nest no deeper than a list of tensors, and pytree's general walk, run around
    every call, cost more than many of the ops. Anything else pytree knows goes to pytree."""
    leaves: list = []
    nodes = pytree.SUPPORTED_NODES

    def add(value: Any) -> None:
        kind = type(value)
        if kind is list or kind is tuple:
            for element in value:
                add(element)
        elif kind is dict:
            for element in value.values():
                add(element)
        elif kind in nodes or isinstance(value, (list, tuple, dict)):  # a namedtuple, a registered node
            leaves.extend(pytree.tree_leaves(value))
        else:
            leaves.append(value)

    for tree in trees:
        add(tree)
    return leaves


def backend_key(args: Any, kwargs: Any):
    """The backend dispatch key of the first tensor argument (CompositeExplicitAutograd if none):
    where a higher-order operator's own kernel for that device is found."""
    from torch._C import DispatchKey

    for leaf in pytree.tree_leaves((args, kwargs)):
        if isinstance(leaf, torch.Tensor):
            kind = leaf.device.type
            if kind == torch._C._get_privateuse1_backend_name():
                return DispatchKey.PrivateUse1
            return {"cpu": DispatchKey.CPU, "cuda": DispatchKey.CUDA, "meta": DispatchKey.Meta}.get(
                kind, DispatchKey.CompositeExplicitAutograd)
    return DispatchKey.CompositeExplicitAutograd


def touches_device(args: Any, kwargs: Any, out: Any, device_type: str) -> bool:
    return _on_device(call_leaves(args, kwargs, out), device_type)


def _on_device(leaves: list, device_type: str) -> bool:
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor) and leaf.device.type == device_type:
            return True
        if isinstance(leaf, torch.device) and leaf.type == device_type:
            return True
    return False


@dataclasses.dataclass(frozen=True)
class RecordedCall:
    """One aten call as the device ran it. Kept by reference, `versions` holds the in-place
    counter of each tensor argument before the call (by `tensor_key`), so a replay can tell
    whether it still holds the value the call read. Kept as snapshots, `args`, `kwargs` and
    `out` hold CPU copies of the device tensors as they were before and after the call."""

    func: Any
    args: tuple
    kwargs: dict
    out: Any
    versions: dict[int, int]
    drawn: Any = None  # a random call kept by reference: CPU copies of its results as it made them


def tensor_key(t: torch.Tensor) -> int:
    """The identity of a tensor's TensorImpl: the same for every Python object wrapping it."""
    return t._cdata


def _versions(leaves: list) -> dict[int, int]:
    found = {}
    for t in leaves:
        if isinstance(t, torch.Tensor):
            try:
                found[tensor_key(t)] = t._version
            except RuntimeError:  # inference tensors keep no version: a replay treats them as unversioned
                pass
    return found


class OpRecorder(TorchDispatchMode):
    """Counts aten overloads that touch `device_type`; remembers the first that raised.

    `on_op(name, args, kwargs)` is an optional hook (the porting trace uses it
    to attach source lines). `keep_calls`: also keep every call in `calls`, by reference
    ("references": cheap, for conformance/reference/replay.py) or as CPU copies of its device tensors
    ("snapshots": each primitive's own inputs and outputs, for judging it alone).

    A higher-order operator (flex attention) is counted under its own name ('higher_order.NAME')
    and then run through its kernel for the device with the recorder active, so the aten ops
    inside it are recorded as well; only those are kept as calls (a replay reruns them).

    `into_subclasses`: an op on a wrapper tensor subclass (a torchao quantized weight, float8
    training's tensor) is handed to the subclass's own `__torch_dispatch__` with the recorder
    active, so the ops the subclass issues on its inner tensors (`aten._scaled_mm`) are recorded;
    the op the subclass received is not counted: it never reaches the backend. PyTorch pops a mode
    while it runs, which hides those inner ops otherwise.
    """

    supports_higher_order_operators = True

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        """Eager `flex_attention` compiles its HOP call (backend "eager", fullgraph): dynamo refuses
        that under a user dispatch mode. Off while dynamo compiles, on while the compiled code runs,
        the recorder still sees every op that runs (the suites never record compiled items)."""
        return True

    def __init__(self, device_type: str, on_op: Callable[[str, Any, Any], None] | None = None,
                 keep_calls: str | None = None, keep_bytes: int | None = None, into_subclasses: bool = False):
        super().__init__()
        self.into_subclasses = into_subclasses
        if keep_calls not in (None, "references", "snapshots"):
            raise ValueError(f"keep_calls must be None, 'references' or 'snapshots', not {keep_calls!r}")
        self.device_type = device_type
        self.ops: Counter[str] = Counter()
        self.failing_op: str | None = None
        self.on_op = on_op
        self.keep_calls = keep_calls
        self.calls: list[RecordedCall] = []
        # Kept by reference, every intermediate tensor stays alive: past `keep_bytes` of outputs
        # (a model's whole forward and backward) the calls are let go and `calls_dropped` says so.
        self.keep_bytes = keep_bytes
        self.kept_bytes = 0
        self.kept_storages: set[int] = set()  # each storage counts once, however many views of it are kept
        self.calls_dropped = False

    def reset(self) -> None:
        """Forget what was recorded, so one recorder serves many runs (one per sample)."""
        self.ops = Counter()
        self.failing_op = None
        self.calls = []
        self.kept_bytes, self.calls_dropped = 0, False
        self.kept_storages = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if isinstance(func, torch._ops.HigherOrderOperator):
            return self._higher_order(func, args, kwargs)
        name = op_name(func)
        # One walk of the arguments serves both questions: this runs around every aten call.
        leaves = call_leaves(args, kwargs)
        if self.into_subclasses:
            subclasses = _wrapper_subclasses(leaves)
            if subclasses:
                return self._through_subclass(func, subclasses, args, kwargs, name, leaves)
        on_device = _on_device(leaves, self.device_type)
        before = None
        if self.keep_calls == "references":
            before = _versions(leaves)
        elif self.keep_calls == "snapshots" and on_device:
            before = self._snapshot((args, kwargs))
        try:
            out = func(*args, **kwargs)
        except BaseException:
            if self.failing_op is None and on_device:
                self.failing_op = name
            raise
        if on_device or touches_device((), {}, out, self.device_type):
            self.ops[name] += 1
            if self.keep_calls == "references" and not self.calls_dropped:
                # A draw's values are copied now: a later in-place write through any alias would
                # change what a replay reads, and no version counter shows every alias's writes.
                drawn = self._snapshot(out) if torch.Tag.nondeterministic_seeded in func.tags else None
                self.calls.append(RecordedCall(func, args, kwargs, out, before, drawn))
                self._count_kept(out)
            elif self.keep_calls == "snapshots" and before is not None and not self.calls_dropped:
                snapshot = self._snapshot(out)
                self.calls.append(RecordedCall(func, *before, snapshot, {}))
                self._count_kept((before, snapshot))
            if self.on_op is not None:
                self.on_op(name, args, kwargs)
        return out

    def _through_subclass(self, func, subclasses, args, kwargs, name, leaves):
        """Run `func` through the subclasses' own dispatch (as the dispatcher would after this
        mode), with this recorder on, so the ops they issue are recorded."""
        try:
            with self:
                for cls in subclasses:
                    out = cls.__torch_dispatch__(func, tuple(subclasses), args, kwargs)
                    if out is not NotImplemented:
                        return out
        except BaseException:
            if self.failing_op is None and _on_device(leaves, self.device_type):
                self.failing_op = name
            raise
        raise TypeError(f"no tensor subclass among {[c.__name__ for c in subclasses]} handles {name}")

    def _higher_order(self, func, args, kwargs):
        """Count the HOP, then run its device kernel with this recorder on (PyTorch pops the mode
        before handing a HOP to it), so the ops it runs are recorded one by one."""
        name = op_name(func)
        on_device = touches_device(args, kwargs, None, self.device_type)
        try:
            with self:
                out = func.dispatch(backend_key(args, kwargs), *args, **kwargs)
        except BaseException:
            if self.failing_op is None and on_device:
                self.failing_op = name
            raise
        if on_device:
            self.ops[name] += 1
            if self.on_op is not None:
                self.on_op(name, args, kwargs)
        return out

    def _count_kept(self, out: Any) -> None:
        if self.keep_bytes is None:
            return
        # A view (a transpose of a weight, an expand) shares its base's storage: counting the whole
        # storage for every view kept a small model's embedding table a thousand times over.
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.device.type != "meta" and t.layout == torch.strided:
                storage = t.untyped_storage()
                if storage.data_ptr() not in self.kept_storages:
                    self.kept_storages.add(storage.data_ptr())
                    self.kept_bytes += storage.nbytes()
        if self.kept_bytes > self.keep_bytes:
            self.calls, self.calls_dropped = [], True
            self.kept_storages = set()

    def _snapshot(self, tree: Any) -> Any:
        def copy(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and value.device.type == self.device_type:
                return value.detach().to("cpu", copy=True)
            return value
        return pytree.tree_map(copy, tree)


def _wrapper_subclasses(leaves: list) -> list[type]:
    """The wrapper tensor subclasses among an op's arguments, in the order they first appear."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    found: list[type] = []
    for leaf in leaves:
        if type(leaf) not in found and is_traceable_wrapper_subclass(leaf):
            found.append(type(leaf))
    return found


@contextlib.contextmanager
def record_ops(device_type: str, on_op: Callable[[str, Any, Any], None] | None = None,
               into_subclasses: bool = False) -> Iterator[OpRecorder]:
    recorder = OpRecorder(device_type, on_op, into_subclasses=into_subclasses)
    with recorder:
        yield recorder
