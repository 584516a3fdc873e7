"""Record which aten overloads run on a device, and which one raised.

A TorchDispatchMode sees every aten call below autograd, for any backend, so
one recorder serves every suite and the porting trace.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode


def op_name(func: Any) -> str:
    """'aten.mul.Tensor': the name profiles, results and reports use."""
    return str(func)


def touches_device(args: Any, kwargs: Any, out: Any, device_type: str) -> bool:
    for leaf in pytree.tree_leaves((args, kwargs, out)):
        if isinstance(leaf, torch.Tensor) and leaf.device.type == device_type:
            return True
        if isinstance(leaf, torch.device) and leaf.type == device_type:
            return True
    return False


class OpRecorder(TorchDispatchMode):
    """Counts aten overloads that touch `device_type`; remembers the first that raised.

    `on_op(name, args, kwargs)` is an optional hook (the porting trace uses it
    to attach source lines).
    """

    def __init__(self, device_type: str, on_op: Callable[[str, Any, Any], None] | None = None):
        super().__init__()
        self.device_type = device_type
        self.ops: Counter[str] = Counter()
        self.failing_op: str | None = None
        self.on_op = on_op

    def reset(self) -> None:
        """Forget what was recorded, so one recorder serves many runs (one per sample)."""
        self.ops = Counter()
        self.failing_op = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = op_name(func)
        on_device = touches_device(args, kwargs, None, self.device_type)
        try:
            out = func(*args, **kwargs)
        except BaseException:
            if self.failing_op is None and on_device:
                self.failing_op = name
            raise
        if on_device or touches_device((), {}, out, self.device_type):
            self.ops[name] += 1
            if self.on_op is not None:
                self.on_op(name, args, kwargs)
        return out


@contextlib.contextmanager
def record_ops(device_type: str, on_op: Callable[[str, Any, Any], None] | None = None) -> Iterator[OpRecorder]:
    recorder = OpRecorder(device_type, on_op)
    with recorder:
        yield recorder
