"""Autocast for the sim device: ``torch.autocast("sim", dtype=torch.bfloat16)``.

Like CUDA's policy in miniature: matmul-class ops run in the autocast dtype; every other op
falls through unchanged (a backend must register at least the fallthrough, or any op under
autocast fails with "Could not run ... from the 'Autocastsim' backend").
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_map

from .dynamo_skip import skip_recursively
from .faults import DEVICE

# CUDA's lower-precision list (aten/src/ATen/autocast_mode.cpp), as far as these ops exist.
LOWER_PRECISION_OPS = (
    "mm", "addmm", "addmv", "addr", "mv", "bmm", "baddbmm", "addbmm", "matmul", "linear",
    "einsum", "chain_matmul", "linalg_multi_dot", "linalg_vecdot", "prelu",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "_convolution", "conv_tbc",
    "scaled_dot_product_attention",
    "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
)

_KEY = "AutocastPrivateUse1"
_LIBS: list = []


def _lower_precision_kernel(qualname: str):
    op = None
    exclude = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)

    def kernel(*args, **kwargs):
        nonlocal op
        if op is None:
            packet, _, overload = qualname.partition(".")
            op = getattr(getattr(torch.ops.aten, packet), overload or "default")
        dtype = torch.get_autocast_dtype(DEVICE)

        def cast(t):
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.device.type == DEVICE:
                return t.to(dtype)
            return t

        with torch._C._ExcludeDispatchKeyGuard(exclude):
            return op(*tree_map(cast, args), **tree_map(cast, kwargs))

    return kernel


def install() -> None:
    if _LIBS:
        return
    fallthrough = torch.library.Library("_", "IMPL")
    fallthrough.fallback(torch.library.fallthrough_kernel, dispatch_key=_KEY)
    policy = torch.library.Library("aten", "IMPL")
    for packet in LOWER_PRECISION_OPS:
        if not hasattr(torch.ops.aten, packet):
            continue
        for overload in getattr(torch.ops.aten, packet).overloads():
            name = packet if overload == "default" else f"{packet}.{overload}"
            if "out" in overload:
                continue
            kernel = _lower_precision_kernel(name)
            policy.impl(name, kernel, _KEY)
            skip_recursively(kernel)  # one shared code object; marking it again is a no-op
    _LIBS.extend([fallthrough, policy])
