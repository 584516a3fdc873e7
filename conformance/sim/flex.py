"""Flex attention on sim, provided the way an out-of-tree PrivateUse1 backend has to.

PyTorch 2.13 offers no registration point for a PrivateUse1 device: `flex_attention` calls
``torch.nn.attention.flex_attention._validate_device``, which refuses any device type outside
its fixed list (CUDA, CPU, XPU, HPU, MPS). The minimal adaptation, the one a real backend must
make too, is two steps:

1. wrap that module-level check so it also accepts the backend's own device type (every other
   device goes to PyTorch's check unchanged); and
2. give the two higher-order operators (``flex_attention`` and ``flex_attention_backward``) a
   kernel for ``DispatchKey.PrivateUse1`` with ``HigherOrderOperator.py_impl``, as PyTorch does
   for CPU/CUDA (``CompositeExplicitAutograd``).

sim's kernels run PyTorch's own dense math on sim tensors, so every aten op inside (the
``score_mod``'s ``aten.tanh``, the matmuls, the softmax) meets the profile, and then apply the
faults named ``higher_order.flex_attention`` / ``higher_order.flex_attention_backward`` to the
kernel's outputs. The profile key ``"flex_attention": false`` leaves the check to PyTorch, so sim
refuses flex attention exactly as stock PyTorch refuses an unlisted device.
"""

from __future__ import annotations

from . import faults
from .faults import DEVICE

FORWARD_OP = "higher_order.flex_attention"
BACKWARD_OP = "higher_order.flex_attention_backward"

_installed = False


def provided() -> bool:
    """Whether the active profile lets sim provide flex attention (the default)."""
    profile = faults.active_profile()
    return profile is None or profile.flex_attention


def install() -> None:
    """Wrap the device check and register sim's kernels for the two HOPs (idempotent)."""
    global _installed
    if _installed:
        return
    import torch.nn.attention.flex_attention as api
    from torch._C import DispatchKey
    import importlib

    hop = importlib.import_module("torch._higher_order_ops.flex_attention")

    stock = api._validate_device

    def validate_device(query, key, value) -> None:
        if query.device.type == DEVICE and provided():
            return
        stock(query, key, value)

    validate_device.__wrapped__ = stock  # type: ignore[attr-defined]
    api._validate_device = validate_device

    def forward(*args, **kwargs):
        return _faulted(FORWARD_OP, hop.sdpa_dense(*args, **kwargs))

    def backward(*args, **kwargs):
        return _faulted(BACKWARD_OP, hop.sdpa_dense_backward(*args, **kwargs))

    hop.flex_attention.py_impl(DispatchKey.PrivateUse1)(forward)
    hop.flex_attention_backward.py_impl(DispatchKey.PrivateUse1)(backward)
    _installed = True


def _faulted(name: str, result):
    """`result` (a tuple of tensors, possibly nested one level) with the profile's faults for
    `name` applied to every floating-point tensor in it."""
    import torch

    profile = faults.active_profile()
    if profile is None or not faults.matching_faults(profile, name):
        return result

    def apply(t):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            return t
        cpu = t.detach().cpu()
        (bad,) = faults.after(profile, name, {faults.dtype_name(t.dtype)}, [cpu], [False])
        return bad.to(t.device)

    def walk(x):
        if isinstance(x, (tuple, list)):
            return type(x)(walk(v) for v in x)
        return apply(x)

    return walk(result)
