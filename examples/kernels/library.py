"""An example kernel library: three custom ops with a plain PyTorch implementation as their
default (CPU) kernel and a tiled, blockwise "device kernel" registered for `sim`, as a
TorchNeuron library registers its NKI kernels for `neuron`.

    NS::flash_attention(q, k, v, causal=False, scale=None)   family attention
    NS::grouped_matmul(x, w, counts)                          its own samples (below)
    NS::rms_norm(x, weight, eps=1e-6)                         family norm, a declared reference

`register(namespace, bugs)` defines them; `bugs` plants known defects for neuron-check's own
tests: causal_off_by_one, bf16_scale, no_fake, wrong_fake_shape, ignores_strides,
empty_expert_crash. target.py registers the library without any.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

import attention
import moe
import rmsnorm
from conformance import kernels

DEVICE = "sim"


def register(namespace: str = "exkern", bugs: Iterable[str] = ()) -> None:
    # The device must exist before a kernel is registered for it (torch_neuronx, for neuron).
    from conformance import sim

    sim.register()
    bugs = frozenset(bugs)
    _flash_attention(namespace, bugs)
    _grouped_matmul(namespace, bugs)
    _rms_norm(namespace, bugs)


def _for_device(fn, kernel, bugs):
    """The device kernel on device tensors, `fn` elsewhere: what autograd differentiates."""
    def impl(*args, **kwargs):
        if args[0].device.type == DEVICE:
            return kernel(*args, **kwargs, bugs=bugs)
        return fn(*args, **kwargs)
    return impl


def _vjp_backward(impl, n_inputs: int):
    """register_autograd's pieces: save the inputs, and differentiate `impl` (the device kernel
    on the device, so a bug in it shows in the gradients too) by recomputation."""
    def setup_context(ctx, inputs, output):
        ctx.inputs = inputs

    def backward(ctx, grad):
        tensors = ctx.inputs[:n_inputs]
        rest = ctx.inputs[n_inputs:]
        _, vjp = torch.func.vjp(lambda *t: impl(*t, *rest), *tensors)
        return (*vjp(grad), *([None] * len(rest)))

    return setup_context, backward


def _flash_attention(namespace: str, bugs: frozenset) -> None:
    @torch.library.custom_op(f"{namespace}::flash_attention", mutates_args=())
    def flash_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: float | None = None) -> Tensor:
        return attention.reference(q, k, v, causal, scale)

    @flash_attention.register_kernel(DEVICE)
    def _(q, k, v, causal=False, scale=None):
        return attention.tiled(q, k, v, causal, scale, bugs=bugs)

    @flash_attention.register_fake
    def _(q, k, v, causal=False, scale=None):
        return q.new_empty((*q.shape[:-1], v.shape[-1]))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs[:3])
        ctx.causal, ctx.scale = inputs[3], inputs[4]

    def backward(ctx, grad):
        q, k, v = ctx.saved_tensors
        planted = bugs if q.device.type == DEVICE else frozenset()
        return (*attention.backward(q, k, v, grad, ctx.causal, ctx.scale, bugs=planted), None, None)

    flash_attention.register_autograd(backward, setup_context=setup_context)
    kernels.family(f"{namespace}::flash_attention", "attention")


def _grouped_matmul(namespace: str, bugs: frozenset) -> None:
    @torch.library.custom_op(f"{namespace}::grouped_matmul", mutates_args=())
    def grouped_matmul(x: Tensor, w: Tensor, counts: Tensor) -> Tensor:
        return moe.reference(x, w, counts)

    @grouped_matmul.register_kernel(DEVICE)
    def _(x, w, counts):
        return moe.blockwise(x, w, counts, bugs=bugs)

    if "no_fake" not in bugs:
        @grouped_matmul.register_fake
        def _(x, w, counts):
            return x.new_empty((x.shape[0], w.shape[-1]))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad):
        # Plain ops with no data-dependent sizes, so torch.compile can trace the backward.
        x, w, counts = ctx.saved_tensors
        expert = torch.repeat_interleave(torch.arange(w.shape[0], device=x.device), counts, output_size=x.shape[0])
        grad_x = (grad.unsqueeze(1) @ w[expert].transpose(1, 2)).squeeze(1)
        grad_w = torch.zeros_like(w).index_add_(0, expert, x.unsqueeze(2) * grad.unsqueeze(1))
        return grad_x, grad_w, None

    grouped_matmul.register_autograd(backward, setup_context=setup_context)

    @kernels.samples(f"{namespace}::grouped_matmul")
    def _(device, dtype, requires_grad):
        for counts in ((3, 5, 2), (0, 7, 4), (6, 0, 0, 9), (17,), (0, 0)):
            tokens = sum(counts)
            x = torch.randn(tokens, 32, device=device).to(dtype).requires_grad_(requires_grad)
            w = (torch.randn(len(counts), 32, 24, device=device) / 32 ** 0.5).to(dtype).requires_grad_(requires_grad)
            yield (x, w, torch.tensor(counts, device=device)), {}, f"tokens per expert {list(counts)}"


def _rms_norm(namespace: str, bugs: frozenset) -> None:
    # No default kernel: only the device's. The reference is declared instead.
    @torch.library.custom_op(f"{namespace}::rms_norm", mutates_args=(), device_types=DEVICE)
    def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
        return rmsnorm.kernel(x, weight, eps, bugs=bugs)

    @rms_norm.register_fake
    def _(x, weight, eps=1e-6):
        return x.new_empty(x.shape[:-1] if "wrong_fake_shape" in bugs else x.shape)

    setup_context, backward = _vjp_backward(lambda x, w, eps=1e-6: rmsnorm.kernel(x, w, eps, bugs=bugs), 2)
    rms_norm.register_autograd(backward, setup_context=setup_context)
    kernels.reference(f"{namespace}::rms_norm")(rmsnorm.reference)
    kernels.family(f"{namespace}::rms_norm", "norm")
