"""sim's fused LSTM and GRU cell kernels: nn.LSTM, nn.GRU and their cells run on sim as on an
accelerator (ATen sends them `_thnn_fused_*_cell`), agree with the CPU, and carry faults."""

from __future__ import annotations

import copy

import pytest

from conformance.models import passes
from op_db.records import Status, WorkItem

torch = pytest.importorskip("torch")

aten = torch.ops.aten


def _modules():
    # (id, module, input shape): the cells take (batch, features); the layers (batch, time,
    # features) with batch_first, else (time, batch, features).
    return [
        ("lstm_cell", lambda: torch.nn.LSTMCell(3, 5), (4, 3)),
        ("lstm_cell_no_bias", lambda: torch.nn.LSTMCell(3, 5, bias=False), (4, 3)),
        ("gru_cell", lambda: torch.nn.GRUCell(3, 5), (4, 3)),
        ("gru_cell_no_bias", lambda: torch.nn.GRUCell(3, 5, bias=False), (4, 3)),
        ("lstm_2_layers_bidirectional_batch_first",
         lambda: torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True, batch_first=True), (2, 6, 3)),
        ("lstm_projected_no_bias", lambda: torch.nn.LSTM(3, 5, proj_size=2, bias=False), (6, 2, 3)),
        ("gru_2_layers_bidirectional", lambda: torch.nn.GRU(3, 5, num_layers=2, bidirectional=True), (6, 2, 3)),
    ]


MODULES = _modules()


def _leaves(value):
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in _leaves(v)]


def _run(make, shape, device, dtype):
    """(what, value) of every forward output and gradient (input first, then the parameters)
    of the module `make` builds, on the input of `shape`, both drawn from one seed."""
    torch.manual_seed(0)
    m, x = make().to(device=device, dtype=dtype), torch.randn(shape)
    inp = x.to(dtype).to(device).requires_grad_()
    outs = _leaves(m(inp))
    weights = torch.Generator().manual_seed(7)
    loss = sum((o.double() * torch.randn(o.shape, generator=weights, dtype=torch.float64).to(device)).sum()
               for o in outs)
    loss.backward()
    grads = [("grad input", inp.grad), *((f"grad {n}", p.grad) for n, p in m.named_parameters())]
    return [(f"output {i}", o.detach().cpu()) for i, o in enumerate(outs)] + [(n, g.cpu()) for n, g in grads]


@pytest.mark.parametrize("make, shape", [m[1:] for m in MODULES], ids=[m[0] for m in MODULES])
def test_fp32_outputs_and_every_gradient_match_the_cpu(sim_device, make, shape):
    on_sim, on_cpu = _run(make, shape, "sim", torch.float32), _run(make, shape, "cpu", torch.float32)
    assert [what for what, _ in on_sim] == [what for what, _ in on_cpu]
    for (what, s), (_, c) in zip(on_sim, on_cpu):
        torch.testing.assert_close(s, c, rtol=1e-5, atol=1e-6, msg=lambda m, what=what: f"{what}: {m}")


def _relative_error(value, exact):
    return ((value.double() - exact).norm() / exact.norm().clamp_min(1e-30)).item()


@pytest.mark.parametrize("make, shape", [m[1:] for m in MODULES], ids=[m[0] for m in MODULES])
def test_bf16_error_is_within_the_dtype_s_own(sim_device, make, shape):
    # Judged against float64, as the numerics rule does, with the flash-attention anchor: at
    # most twice the error of the same algorithm run by the CPU in bf16 (ATen's step-by-step
    # cells; oneDNN's LSTM, which keeps float32 inside, is not that algorithm), with one bf16
    # rounding step of slack for tiny errors.
    exact = _run(make, shape, "cpu", torch.float64)
    on_sim = _run(make, shape, "sim", torch.bfloat16)
    with torch.backends.mkldnn.flags(enabled=False):
        on_cpu = _run(make, shape, "cpu", torch.bfloat16)
    for (what, e), (_, s), (_, c) in zip(exact, on_sim, on_cpu, strict=True):
        sim_err, cpu_err = _relative_error(s, e), _relative_error(c, e)
        assert sim_err <= max(2 * cpu_err, 2 ** -8), f"{what}: sim {sim_err:.3g} vs CPU bf16 {cpu_err:.3g}"


# -- the kernels' contract with autograd: gate order, workspace, one rounding ------------------


def _lstm_reference(ig, hg, cx, ib, hb):
    pre = ig + hg + (0 if ib is None else ib + hb)
    i, f, g, o = pre.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    return o * cy.tanh(), cy, torch.cat([i, f, g, o], 1)


def _gru_reference(ig, hg, hx, ib, hb):
    if ib is not None:
        ig, hg = ig + ib, hg + hb
    (xr, xz, xn), (hr, hz, hn) = ig.chunk(3, 1), hg.chunk(3, 1)
    r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return n + z * (hx - n), torch.cat([r, z, n, hx, hn], 1)


def _cell_inputs(gates, batch=3, hidden=4, bias=True, dtype=torch.float64):
    g = torch.Generator().manual_seed(3)
    rand = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(dtype)  # noqa: E731
    ig, hg, state = rand(batch, gates * hidden), rand(batch, gates * hidden), rand(batch, hidden)
    ib, hb = (rand(gates * hidden), rand(gates * hidden)) if bias else (None, None)
    return ig, hg, state, ib, hb


CELLS = pytest.mark.parametrize("cell, gates, reference", [
    (aten._thnn_fused_lstm_cell, 4, _lstm_reference),
    (aten._thnn_fused_gru_cell, 3, _gru_reference),
], ids=["lstm", "gru"])


def _sim(*tensors):
    return [None if t is None else t.to("sim") for t in tensors]


@pytest.mark.parametrize("bias", [True, False])
@CELLS
def test_forward_and_workspace_follow_the_cuda_kernel_layout(sim_device, cell, gates, reference, bias):
    inputs = _cell_inputs(gates, bias=bias)
    got = cell(*_sim(*inputs))
    want = reference(*inputs)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.device.type == "sim" and g.shape == w.shape, f"output {i}"
        torch.testing.assert_close(g.cpu(), w, msg=lambda m, i=i: f"output {i}: {m}")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@CELLS
def test_half_precision_cells_compute_in_float32_and_round_once(sim_device, cell, gates, reference, dtype):
    # CUDA's kernels accumulate in acc_type (float32): each output is the float32 result of the
    # half-precision inputs, rounded once (at most one step off where float32's own last bit
    # decides the rounding).
    inputs = _cell_inputs(gates, dtype=dtype)
    got = cell(*_sim(*inputs))
    want = reference(*[None if t is None else t.double() for t in inputs])
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == dtype
        step = torch.finfo(dtype).eps * w.abs().clamp_min(torch.finfo(dtype).tiny)
        off = (g.cpu().double() - w.to(dtype).double()).abs()
        assert (off <= step).all(), f"output {i}: {off.max().item()} off the once-rounded value"


@pytest.mark.parametrize("grads", ["hy and cy", "hy only", "cy only"])
@pytest.mark.parametrize("bias", [True, False])
def test_lstm_backward_impl_gives_autograd_s_gradients(sim_device, grads, bias):
    ig, hg, cx, ib, hb = _cell_inputs(4, bias=bias)
    leaves = [t.requires_grad_() for t in (ig, hg, cx)]
    hy, cy, _ = _lstm_reference(ig, hg, cx, ib, hb)
    g = torch.Generator().manual_seed(5)
    grad_hy = torch.randn(hy.shape, generator=g, dtype=torch.float64) if "hy" in grads else None
    grad_cy = torch.randn(cy.shape, generator=g, dtype=torch.float64) if "cy" in grads else None
    outputs = [o for o, go in ((hy, grad_hy), (cy, grad_cy)) if go is not None]
    want_gates, _, want_cx = torch.autograd.grad(outputs, leaves, [go for go in (grad_hy, grad_cy) if go is not None])
    _, cy_sim, workspace = aten._thnn_fused_lstm_cell(*_sim(ig.detach(), hg.detach(), cx.detach(), ib, hb))
    grad_gates, grad_cx, grad_bias = aten._thnn_fused_lstm_cell_backward_impl(
        *_sim(grad_hy, grad_cy, cx.detach()), cy_sim, workspace, bias)
    torch.testing.assert_close(grad_gates.cpu(), want_gates)
    torch.testing.assert_close(grad_cx.cpu(), want_cx)
    if bias:
        torch.testing.assert_close(grad_bias.cpu(), want_gates.sum(0))
    else:
        assert grad_bias is None


@pytest.mark.parametrize("bias", [True, False])
def test_gru_backward_gives_autograd_s_gradients(sim_device, bias):
    ig, hg, hx, ib, hb = _cell_inputs(3, bias=bias)
    leaves = [t.requires_grad_() for t in (ig, hg, hx)]
    hy, _ = _gru_reference(ig, hg, hx, ib, hb)
    grad_hy = torch.randn(hy.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    want = torch.autograd.grad(hy, leaves, grad_hy)
    _, workspace = aten._thnn_fused_gru_cell(*_sim(ig.detach(), hg.detach(), hx.detach(), ib, hb))
    got = aten._thnn_fused_gru_cell_backward(grad_hy.to("sim"), workspace, bias)
    for i, (g, w) in enumerate(zip(got[:3], want)):
        torch.testing.assert_close(g.cpu(), w, msg=lambda m, i=i: f"gradient {i}: {m}")
    if bias:
        torch.testing.assert_close(got[3].cpu(), want[0].sum(0))  # the input side's gates
        torch.testing.assert_close(got[4].cpu(), want[1].sum(0))  # the hidden side's
    else:
        assert got[3] is None and got[4] is None


def test_out_overloads_write_their_outputs(sim_device):
    ig, hg, cx, ib, hb = _sim(*_cell_inputs(4))
    outs = [torch.empty(0, device="sim", dtype=torch.float64) for _ in range(3)]
    aten._thnn_fused_lstm_cell.out(ig, hg, cx, ib, hb, out0=outs[0], out1=outs[1], out2=outs[2])
    for o, w in zip(outs, aten._thnn_fused_lstm_cell(ig, hg, cx, ib, hb)):
        assert torch.equal(o.cpu(), w.cpu())


def test_double_backward_through_a_cell_matches_the_cpu(sim_device):
    # Under create_graph autograd differentiates the fused cells with ATen's composite
    # `_thnn_differentiable_*` helpers; the fused forward's outputs must feed them right.
    torch.manual_seed(0)
    cell, x = torch.nn.LSTMCell(3, 4).double(), torch.randn(2, 3, dtype=torch.float64)

    def second_order(device):
        c = copy.deepcopy(cell).to(device)
        inp = x.to(device).requires_grad_()
        hy, cy = c(inp)
        (g,) = torch.autograd.grad((hy * cy).sum(), inp, create_graph=True)
        return torch.autograd.grad(g.pow(2).sum(), c.weight_hh)[0].cpu()

    torch.testing.assert_close(second_order("sim"), second_order("cpu"))


def test_integer_gates_are_refused_in_one_sentence(sim_device):
    gates = torch.zeros(2, 8, dtype=torch.int32, device="sim")
    with pytest.raises(RuntimeError, match="_thnn_fused_lstm_cell.* not implemented for 'int32'"):
        aten._thnn_fused_lstm_cell(gates, gates, torch.zeros(2, 2, dtype=torch.int32, device="sim"))


# -- through the models checker: fault-free passes, a faulty cell is a MISMATCH -----------------


class _Recurrent(torch.nn.Module):
    """A tiny model of both recurrent kinds, as the models suite runs a zoo model."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 6, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = torch.nn.GRU(12, 5, batch_first=True)

    def forward(self, input_values):
        return self.gru(self.lstm(input_values)[0])[0]


@pytest.fixture
def recurrent_model(monkeypatch):
    from conformance.models import runner

    def item(item, options, seed):
        torch.manual_seed(seed)
        inputs = {"input_values": torch.randn(2, 7, 4)}
        return _Recurrent(), inputs, passes._VARIANTS[item.variant], {"task": "base", "class": "_Recurrent"}

    monkeypatch.setattr(runner, "_transformers_item", item)

    def run(ctx, variant="forward", dtype="float32"):
        return runner.run_item(WorkItem("model", "tiny_recurrent", variant, dtype, "eager"), ctx)

    return run


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("variant", ["forward", "backward"])
def test_fault_free_recurrent_model_passes(models_ctx, use_profile, recurrent_model, variant, dtype):
    result = recurrent_model(models_ctx, variant, dtype)
    assert result.status is Status.PASS, result.message
    assert "aten._thnn_fused_lstm_cell.default" in result.aten_ops
    assert "aten._thnn_fused_gru_cell.default" in result.aten_ops
    if variant == "backward":
        assert "aten._thnn_fused_lstm_cell_backward_impl.default" in result.aten_ops
        assert "aten._thnn_fused_gru_cell_backward.default" in result.aten_ops


# The smallest scales each item catches (measured): 1.002 in float32; in bfloat16 1.02 for the
# LSTM cell's forward (seen through a GRU after it), 1.005 for the backward kernels.
@pytest.mark.parametrize("op, variant, dtype, scale", [
    ("aten._thnn_fused_lstm_cell.default", "forward", "float32", 1.01),
    ("aten._thnn_fused_lstm_cell.default", "forward", "bfloat16", 1.05),
    ("aten._thnn_fused_gru_cell.default", "forward", "float32", 1.01),
    ("aten._thnn_fused_lstm_cell_backward_impl.default", "backward", "float32", 1.01),
    ("aten._thnn_fused_lstm_cell_backward_impl.default", "backward", "bfloat16", 1.01),
    ("aten._thnn_fused_gru_cell_backward.default", "backward", "bfloat16", 1.01),
])
def test_scale_fault_on_a_fused_cell_is_a_mismatch(models_ctx, use_profile, recurrent_model, op, variant, dtype, scale):
    use_profile({"name": "cell-scale", "faults": [{"op": op, "kind": "scale", "value": scale}]})
    result = recurrent_model(models_ctx, variant, dtype)
    assert result.status is Status.MISMATCH, result.message
    assert result.aten_ops[op] >= 1


def _lstm_cell_step():
    cell, x = torch.nn.LSTMCell(3, 4).to("sim", torch.bfloat16), torch.randn(2, 3).to("sim", torch.bfloat16)
    return lambda: cell(x)


def _antialiased_resize():
    x = torch.randn(1, 2, 9, 8).to("sim", torch.bfloat16)
    return lambda: (torch.nn.functional.interpolate(x, size=(4, 5), mode="bilinear", antialias=True),)


@pytest.mark.parametrize(("workload", "op"), [
    (_lstm_cell_step, "aten._thnn_fused_lstm_cell.default"),
    (_antialiased_resize, "aten._upsample_bilinear2d_aa.default"),
], ids=["lstm-cell", "antialiased-resize-bf16"])
def test_replay_and_primitive_judging_run_accelerator_only_kernels_on_the_cpu(sim_device, use_profile, workload, op):
    # Rule 6's second reference reruns the device's calls on the CPU, which has no kernel for
    # these ops (in this dtype): the stand-ins of accelerator_kernels.py run them, so the replay
    # is available, and a faulty kernel fails as a primitive of the sequence.
    from conformance.reference.oprecord import OpRecorder
    from conformance.reference.primitives import judge_primitives
    from conformance.reference.replay import replay

    torch.manual_seed(0)
    step = workload()

    def recorded(keep):
        with torch.no_grad(), OpRecorder("sim", keep_calls=keep) as recorder:
            out = step()
        return recorder.calls, out

    calls, out = recorded("references")
    assert any(str(c.func) == op for c in calls)
    again = replay(calls, out, "sim")
    assert again is not None
    for r, o in zip(again, out):
        assert torch.equal(r, o.cpu())
    assert judge_primitives(recorded("snapshots")[0], "sim").ok
    use_profile({"name": "kernel-scale", "faults": [{"op": op, "kind": "scale", "value": 1.05}]})
    verdict = judge_primitives(recorded("snapshots")[0], "sim")
    assert not verdict.ok and verdict.where == op, verdict.reason


def test_unsupported_fused_cell_is_named(models_ctx, use_profile, recurrent_model):
    use_profile({"name": "no-lstm-cell", "unsupported_ops": ["aten._thnn_fused_lstm_cell.default"]})
    result = recurrent_model(models_ctx)
    assert result.status is Status.UNSUPPORTED
    assert result.failing_op == "aten._thnn_fused_lstm_cell.default"
