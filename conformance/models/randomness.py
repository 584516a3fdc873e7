"""Controlling random work inside a model's forward (big_bird draws uniform numbers in eval).

Reseeding both sides identically is enough when the device's generator
reproduces the CPU stream (the sim device does). A real accelerator has its
own generator algorithm (Philox on CUDA, its own on Neuron), so the same seed
gives different numbers and the comparison would judge the RNG, not the
model. `random_on_cpu` therefore runs every seeded random aten op that
touches the device on the CPU, from the CPU default generator, and moves the
result over: device and CPU reference then consume the very same stream.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from conformance.reference.oprecord import backend_key, touches_device


def reseed(seed: int, adapter: Any = None) -> None:
    """Same seed for Python, NumPy and the CPU generator and, when given, the device's
    (some models draw with NumPy, e.g. big_bird's random blocks in training)."""
    import random

    import numpy

    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)
    if adapter is not None:
        adapter.manual_seed(seed)


class RandomOnCpu(TorchDispatchMode):
    """Runs seeded random ops that touch `device_type` on the CPU; counts them in `.ops`.

    A model attending through flex runs a higher-order operator, compiled by Transformers (and
    by eager `flex_attention` itself): the mode passes HOPs through and stays out of dynamo's
    way while it compiles, as the op recorder does, or every flex model would fail here."""

    supports_higher_order_operators = True

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    def __init__(self, device_type: str):
        super().__init__()
        self.device_type = device_type
        self.ops: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if isinstance(func, torch._ops.HigherOrderOperator):  # PyTorch popped this mode: its ops run under it again
            with self:
                return func.dispatch(backend_key(args, kwargs), *args, **kwargs)
        if torch.Tag.nondeterministic_seeded not in func.tags or not touches_device(args, kwargs, None, self.device_type):
            return func(*args, **kwargs)
        name = str(func)
        self.ops[name] = self.ops.get(name, 0) + 1
        leaves = pytree.tree_leaves((args, kwargs))
        device = next(
            leaf.device if isinstance(leaf, torch.Tensor) else leaf
            for leaf in leaves
            if isinstance(leaf, (torch.Tensor, torch.device))
            and (leaf.device.type if isinstance(leaf, torch.Tensor) else leaf.type) == self.device_type
        )
        to_cpu = lambda x: x.to("cpu") if isinstance(x, torch.Tensor) else (  # noqa: E731
            torch.device("cpu") if isinstance(x, torch.device) else x)
        cpu_args, cpu_kwargs = pytree.tree_map(to_cpu, (args, kwargs))
        out = func(*cpu_args, **cpu_kwargs)
        if func._schema.is_mutable and args and isinstance(args[0], torch.Tensor):
            # in-place draw (uniform_, normal_, bernoulli_): write the CPU numbers back
            args[0].copy_(cpu_args[0])
            return args[0]
        return pytree.tree_map(lambda x: x.to(device) if isinstance(x, torch.Tensor) else x, out)
