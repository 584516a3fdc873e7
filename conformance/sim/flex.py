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
kernel's outputs. The backward is autograd through that same dense forward math, not PyTorch's
dense backward: the latter's batching rule for the gradient of a captured tensor
(``flex_lib::zeros_and_scatter``) rejects chained indexing such as ``bias[b][h][q][kv]``
("idx shape ... must match value shape ..."), which Transformers' own score_mods use (its flex
integration, Doge, Parakeet, SAM3), so a model that is right would fail on sim for a limit of
sim's kernel. The profile key ``"flex_attention": false`` leaves the check to PyTorch, so sim
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
        return _faulted(BACKWARD_OP, _dense_backward(hop, *args, **kwargs))

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


def _dense_backward(hop, query, key, value, out, logsumexp, grad_out, grad_logsumexp, fw_graph, joint_graph,
                    block_mask, scale, kernel_options, score_mod_other_buffers, mask_mod_other_buffers):
    """flex_attention_backward's results (grads of q, k, v and of each floating-point captured
    score_mod tensor) by autograd through PyTorch's dense forward math (`math_attention`, the
    forward kernel's), the HOP's log-sum-exp output in the same log2 units."""
    import torch
    import torch._dynamo._trace_wrapped_higher_order_op as getitem

    del out, joint_graph  # recomputed / not needed: autograd differentiates the forward graph
    q, k, v = (t.detach().requires_grad_() for t in (query, key, value))
    buffers = tuple(b.detach().requires_grad_() if _wants_grad(b) else b for b in score_mod_other_buffers)
    wanted = [q, k, v, *(b for b in buffers if _wants_grad(b))]
    # Score_mod indexing goes through aten.index, whose own backward batches under vmap, rather
    # than the ModIndex function PyTorch's getitem transform applies (its batching rule is the
    # one that rejects chained indexing).
    plain_index, getitem.mod_index = getitem.mod_index, lambda x, indices: torch.ops.aten.index(x, indices)
    try:
        with _autograd_inside_kernel(), torch.enable_grad():
            found, lse, _ = hop.math_attention(q, k, v, fw_graph, block_mask, scale, kernel_options, buffers,
                                               mask_mod_other_buffers)
            pairs = [(o, g) for o, g in ((found, grad_out), (lse, grad_logsumexp)) if g is not None]
            grads = torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs], allow_unused=True)
    finally:
        getitem.mod_index = plain_index
    grad_q, grad_k, grad_v = (torch.zeros_like(t) if g is None else g for g, t in zip(grads[:3], (query, key, value)))
    rest = iter(grads[3:])
    captured = tuple(next(rest) if _wants_grad(b) else None for b in buffers)
    return grad_q, grad_k, grad_v, captured


def _wants_grad(value) -> bool:
    """Every floating-point captured tensor gets a gradient: inside a compiled backward graph the
    kernel is given plain tensors (requires_grad False) where the graph still wants the gradient
    of a captured tensor that required it when traced; autograd drops what is not needed."""
    import torch

    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _autograd_inside_kernel():
    """The HOP's device kernel runs below autograd (its keys excluded); the recomputation inside
    the backward kernel needs autograd back for the length of the block."""
    import torch
    from torch._C import DispatchKey

    excluded = torch._C._dispatch_tls_local_exclude_set()
    for key in (DispatchKey.AutogradPrivateUse1, DispatchKey.AutogradCPU, DispatchKey.ADInplaceOrView,
                DispatchKey.AutogradOther):
        excluded = excluded.remove(key)
    return torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(), excluded)
