"""The fused LSTM and GRU cell kernels that PyTorch sends to every accelerator and the CPU lacks.

ATen's `lstm_cell` and `gru_cell` (behind nn.LSTMCell, nn.GRUCell and every step of nn.LSTM and
nn.GRU) call `_thnn_fused_lstm_cell` / `_thnn_fused_gru_cell` on CUDA, XPU and PrivateUse1
tensors, with the two gate matmuls already done. Autograd differentiates them
(derivatives.yaml) with `_thnn_fused_lstm_cell_backward_impl` / `_thnn_fused_gru_cell_backward`,
which read the workspace the forward saved; under create_graph it uses the
`_thnn_differentiable_*` helpers instead, which decompose into element-wise ops. The CPU has
no kernel for any of the four, so a PrivateUse1 backend must bring its own. These serve twice:
as the sim device's kernels and as the CPU's stand-in wherever the checker reruns a device's
recorded calls on the CPU, through the table of accelerator_kernels.py.

These follow the contract of ATen's CUDA kernels, since autograd's formulas depend on it:

* LSTM gates are laid out (input, forget, cell, output) along dim 1, four blocks of `hidden`;
  the workspace is the four activated gates, shape (batch, 4 * hidden).
* GRU gates are (reset, update, new); the workspace is (batch, 5 * hidden): reset, update and
  new gates, the previous hidden state, and the hidden new-gate pre-activation plus its bias.
* Each element is computed in the accumulate type (float32 for bfloat16 and float16, as CUDA's
  `acc_type`; the dtype itself for float32 and float64) and rounded once into each output.
* Bias gradients are the gate gradients summed over the batch in the tensors' dtype; without a
  bias they are undefined (None).
"""

from __future__ import annotations

import torch

_ACC = {torch.bfloat16: torch.float32, torch.float16: torch.float32}
_FLOATS = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
_LSTM_GATES = 4
_GRU_GATES = 3
_GRU_WORKSPACE_BLOCKS = 5


def _bound(func, args, kwargs) -> dict:
    """The op's arguments by schema name, defaults filled in."""
    values = {}
    for i, a in enumerate(func._schema.arguments):
        if i < len(args) and not a.kwarg_only:
            values[a.name] = args[i]
        elif a.name in kwargs:
            values[a.name] = kwargs[a.name]
        else:
            values[a.name] = a.default_value
    return values


def _accumulate_type(op: str, t: torch.Tensor) -> torch.dtype:
    if t.dtype not in _FLOATS:
        raise RuntimeError(f'"{op}" not implemented for \'{str(t.dtype).removeprefix("torch.")}\'')
    return _ACC.get(t.dtype, t.dtype)


def _check_cell(op: str, gates: int, input_gates, hidden_gates, state, input_bias, hidden_bias) -> int:
    """The hidden size, after the shape checks the fused kernels make."""
    if input_gates.dim() != 2 or input_gates.shape != hidden_gates.shape:
        raise RuntimeError(
            f"{op}: input_gates and hidden_gates must be 2-D and of one shape, got "
            f"{tuple(input_gates.shape)} and {tuple(hidden_gates.shape)}")
    batch, width = input_gates.shape
    if (input_bias is None) != (hidden_bias is None):
        raise RuntimeError(f"{op}: input_bias and hidden_bias must be given together")
    if input_bias is not None and not (input_bias.dim() == 1 and input_bias.numel() == width
                                       and input_bias.shape == hidden_bias.shape):
        raise RuntimeError(
            f"{op}: the biases must be 1-D of size {width}, got {tuple(input_bias.shape)} and "
            f"{tuple(hidden_bias.shape)}")
    if width % gates or state.dim() != 2 or state.numel() != batch * (width // gates):
        raise RuntimeError(
            f"{op}: the previous state must be 2-D with {batch} x {width // gates} elements for "
            f"gates of shape {tuple(input_gates.shape)}, got {tuple(state.shape)}")
    return width // gates


def _cell_inputs(op: str, gates: int, state_name: str, func, args, kwargs):
    """(previous state, gates' dtype, accumulate type, pre-activations) of a forward cell call; the
    pre-activations are the input side, the hidden side and their biases (None without), each
    in the accumulate type, the sides (batch, gates, hidden) and the biases (gates, hidden)."""
    a = _bound(func, args, kwargs)
    ig, hg, state, ib, hb = a["input_gates"], a["hidden_gates"], a[state_name], a["input_bias"], a["hidden_bias"]
    acc = _accumulate_type(op, ig)
    _check_cell(op, gates, ig, hg, state, ib, hb)
    batch = ig.shape[0]
    sides = ig.to(acc).reshape(batch, gates, -1), hg.to(acc).reshape(batch, gates, -1)
    biases = (None, None) if ib is None else (ib.to(acc).reshape(gates, -1), hb.to(acc).reshape(gates, -1))
    return state, ig.dtype, acc, (*sides, *biases)


def lstm_cell(func, args, kwargs):
    """(hy, cy, workspace) of one LSTM step from its gate pre-activations."""
    cx, dtype, acc, (x, h, bx, bh) = _cell_inputs("_thnn_fused_lstm_cell", _LSTM_GATES, "cx", func, args, kwargs)
    pre = x + h if bx is None else x + h + bx + bh
    i, f, g, o = pre.unbind(1)
    i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    cy = f * cx.to(acc).reshape(f.shape) + i * g
    hy = o * torch.tanh(cy)
    workspace = torch.stack([i, f, g, o], 1).reshape(cx.shape[0], -1).to(dtype)
    return hy.to(dtype).reshape(cx.shape), cy.to(dtype).reshape(cx.shape), workspace


def lstm_cell_backward(func, args, kwargs):
    """(grad_gates, grad_cx, grad_bias) of one LSTM step from the forward's workspace."""
    a = _bound(func, args, kwargs)
    op = "_thnn_fused_lstm_cell_backward_impl"
    grad_hy, grad_cy, cx, cy, workspace = a["grad_hy"], a["grad_cy"], a["cx"], a["cy"], a["workspace"]
    if grad_hy is None and grad_cy is None:
        return None, None, None
    acc = _accumulate_type(op, workspace)
    shape = (grad_hy if grad_hy is not None else grad_cy).shape
    if len(shape) != 2 or cx.shape != shape or cy.shape != shape or \
            workspace.dim() != 2 or workspace.numel() != shape[0] * shape[1] * _LSTM_GATES:
        raise RuntimeError(
            f"{op}: grad, cx and cy must be 2-D of one shape and the workspace hold four gates "
            f"each, got {tuple(shape)}, {tuple(cx.shape)}, {tuple(cy.shape)} and "
            f"{tuple(workspace.shape)}")
    i, f, g, o = workspace.to(acc).reshape(shape[0], _LSTM_GATES, shape[1]).unbind(1)
    tanh_cy = torch.tanh(cy.to(acc))
    grad_c = torch.zeros_like(tanh_cy)
    grad_o = torch.zeros_like(tanh_cy)
    if grad_hy is not None:
        go = grad_hy.to(acc)
        grad_o = go * tanh_cy
        grad_c = go * o * (1 - tanh_cy * tanh_cy)
    if grad_cy is not None:
        grad_c = grad_c + grad_cy.to(acc)
    grads = torch.stack([
        grad_c * g * (1 - i) * i,
        grad_c * cx.to(acc) * (1 - f) * f,
        grad_c * i * (1 - g * g),
        grad_o * (1 - o) * o,
    ], 1)
    dtype = workspace.dtype
    grad_gates = grads.reshape(shape[0], -1).to(dtype)
    grad_cx = (grad_c * f).to(dtype)
    grad_bias = grad_gates.sum(0) if a["has_bias"] else None
    return grad_gates, grad_cx, grad_bias


def gru_cell(func, args, kwargs):
    """(hy, workspace) of one GRU step from its gate pre-activations."""
    hx, dtype, acc, (x, h, bx, bh) = _cell_inputs("_thnn_fused_gru_cell", _GRU_GATES, "hx", func, args, kwargs)
    if bx is None:
        bx = bh = torch.zeros((_GRU_GATES, 1), dtype=acc)
    r = torch.sigmoid(x[:, 0] + h[:, 0] + bx[0] + bh[0])
    z = torch.sigmoid(x[:, 1] + h[:, 1] + bx[1] + bh[1])
    # The reset gate scales the hidden side of the new gate, its bias included.
    hidden_new = h[:, 2] + bh[2]
    n = torch.tanh(x[:, 2] + bx[2] + r * hidden_new)
    prev = hx.reshape(r.shape)
    hy = n + z * (prev.to(acc) - n)
    workspace = torch.stack([r.to(dtype), z.to(dtype), n.to(dtype), prev.to(dtype),
                             hidden_new.to(dtype)], 1).reshape(r.shape[0], -1)
    return hy.to(dtype).reshape(hx.shape), workspace


def gru_cell_backward(func, args, kwargs):
    """(grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)."""
    a = _bound(func, args, kwargs)
    op = "_thnn_fused_gru_cell_backward"
    grad_hy, workspace = a["grad_hy"], a["workspace"]
    acc = _accumulate_type(op, grad_hy)
    if grad_hy.dim() != 2 or workspace.shape != (grad_hy.shape[0], grad_hy.shape[1] * _GRU_WORKSPACE_BLOCKS):
        raise RuntimeError(
            f"{op}: grad_hy must be 2-D and the workspace (batch, 5 * hidden), got "
            f"{tuple(grad_hy.shape)} and {tuple(workspace.shape)}")
    batch, hidden = grad_hy.shape
    r, z, n, prev, hidden_new = workspace.to(acc).reshape(batch, _GRU_WORKSPACE_BLOCKS, hidden).unbind(1)
    go = grad_hy.to(acc)
    grad_z = go * (prev - n) * (1 - z) * z
    grad_n = go * (1 - z) * (1 - n * n)
    grad_r = grad_n * hidden_new * (1 - r) * r
    dtype = grad_hy.dtype
    grad_input = torch.stack([grad_r, grad_z, grad_n], 1).reshape(batch, -1).to(dtype)
    grad_hidden = torch.stack([grad_r, grad_z, grad_n * r], 1).reshape(batch, -1).to(dtype)
    grad_hx = (go * z).to(dtype)
    if not a["has_bias"]:
        return grad_input, grad_hidden, grad_hx, None, None
    return grad_input, grad_hidden, grad_hx, grad_input.sum(0), grad_hidden.sum(0)


# By `str(OpOverload)`, as the recorder and the sim fallback name ops.
KERNELS = {
    "aten._thnn_fused_lstm_cell.default": lstm_cell,
    "aten._thnn_fused_lstm_cell_backward_impl.default": lstm_cell_backward,
    "aten._thnn_fused_gru_cell.default": gru_cell,
    "aten._thnn_fused_gru_cell_backward.default": gru_cell_backward,
}


def _writing_outs(kernel):
    """The `.out` overload of `kernel`'s op: the functional result, written into `out0`..."""

    def out_kernel(func, args, kwargs):
        outs = {k: v for k, v in kwargs.items() if k.startswith("out")}
        rest = {k: v for k, v in kwargs.items() if k not in outs}
        functional = getattr(torch.ops.aten, func._schema.name.split("::")[-1]).default
        results = kernel(functional, args, rest)
        written = []
        for (_, out), result in zip(sorted(outs.items()), results):
            if result is not None:
                out.resize_(result.shape).copy_(result)
            written.append(out)
        return tuple(written)

    return out_kernel


KERNELS.update({name.replace(".default", ".out"): _writing_outs(kernel) for name, kernel in KERNELS.items()})

