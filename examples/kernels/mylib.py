import torch
from torch import Tensor

from conformance import kernels

import conformance.sim

conformance.sim.register()  # the device must exist first (torch_neuronx does this for neuron)


@torch.library.custom_op("mylib::scaled_softmax", mutates_args=())
def scaled_softmax(x: Tensor, scale: float) -> Tensor:
    return torch.softmax(x * scale, dim=-1)  # the default kernel: the reference


@scaled_softmax.register_kernel("sim")  # the device kernel under test
def _(x, scale):
    shifted = x * scale - (x * scale).amax(dim=-1, keepdim=True)
    return (shifted.exp() / shifted.exp().sum(dim=-1, keepdim=True)).to(x.dtype)


@scaled_softmax.register_fake
def _(x, scale):
    return torch.empty_like(x)


def _setup_context(ctx, inputs, output):
    ctx.scale = inputs[1]
    ctx.save_for_backward(output)


def _backward(ctx, grad):
    (y,) = ctx.saved_tensors
    return ctx.scale * y * (grad - (grad * y).sum(dim=-1, keepdim=True)), None


scaled_softmax.register_autograd(_backward, setup_context=_setup_context)


@kernels.samples("mylib::scaled_softmax")
def _(device, dtype, requires_grad):
    for rows, width in ((4, 33), (1, 1), (0, 8)):
        x = torch.randn(rows, width, device=device).to(dtype).requires_grad_(requires_grad)
        yield (x, 0.5), {}, f"{rows}x{width}"
    wide = torch.randn(16, 40, device=device).to(dtype).t()  # transposed storage
    yield (wide.requires_grad_(requires_grad), 2.0), {}, "40x16 transposed"
