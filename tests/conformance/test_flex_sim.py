"""Flex attention on sim (provided as an out-of-tree backend must) and the op recorder on its HOPs."""

from __future__ import annotations

import pytest
import torch

from conformance.reference.oprecord import OpRecorder


def _soft_cap(score, b, h, q_idx, kv_idx):
    return 5 * torch.tanh(score / 5)


def _inputs(device, grad=False):
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(1, 2, 24, 8, generator=gen).to(device).requires_grad_(grad) for _ in range(3)]


def _flex(*args, **kwargs):
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention(*args, **kwargs)


def test_sim_provides_flex_attention_forward_and_backward(sim_device):
    q, k, v = _inputs("cpu")
    expected = _flex(q, k, v, score_mod=_soft_cap)
    qs, ks, vs = _inputs("sim", grad=True)
    out = _flex(qs, ks, vs, score_mod=_soft_cap)
    torch.testing.assert_close(out.cpu(), expected)
    out.sum().backward()
    assert qs.grad.device.type == "sim" and torch.isfinite(qs.grad.cpu()).all()


@pytest.mark.parametrize("op,grad", [("higher_order.flex_attention", False),
                                     ("higher_order.flex_attention_backward", True)])
def test_fault_on_sims_flex_kernel_changes_its_results(use_profile, op, grad):
    clean = _inputs("sim", grad)
    out = _flex(*clean)
    if grad:
        out.sum().backward()
    good = [t.grad.cpu() for t in clean] if grad else [out.cpu()]
    use_profile({"faults": [{"op": op, "kind": "scale", "value": 1.01}]})
    faulty = _inputs("sim", grad)
    out = _flex(*faulty)
    if grad:
        out.sum().backward()
    bad = [t.grad.cpu() for t in faulty] if grad else [out.cpu()]
    torch.testing.assert_close(bad[0], good[0] * 1.01)


def test_profile_can_refuse_flex_attention_as_stock_pytorch_does(use_profile):
    use_profile({"flex_attention": False})
    with pytest.raises(ValueError, match="Found input tensors on sim device"):
        _flex(*_inputs("sim"))


def test_profile_flex_attention_must_be_a_boolean():
    from op_db.errors import InputError
    from op_db.sim_profile import load_profile

    assert load_profile({"flex_attention": False}).to_dict()["flex_attention"] is False
    with pytest.raises(InputError, match="'flex_attention' must be true or false"):
        load_profile({"flex_attention": "no"})


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_recorder_records_the_hop_and_the_ops_inside_it(sim_device, device):
    recorder = OpRecorder(device, keep_calls="references")
    grad = device == "sim"  # stock PyTorch has no flex backward on the CPU
    q, k, v = _inputs(device, grad)
    with recorder:
        out = _flex(q, k, v, score_mod=_soft_cap)
        if grad:
            out.sum().backward()
    assert recorder.failing_op is None
    assert recorder.ops["higher_order.flex_attention"] == 1 and recorder.ops["aten.tanh.default"] >= 1
    if grad:
        assert recorder.ops["higher_order.flex_attention_backward"] == 1
    assert all(not isinstance(c.func, torch._ops.HigherOrderOperator) for c in recorder.calls)


@pytest.mark.parametrize("chained", [False, True])
def test_sims_flex_backward_gives_the_gradient_of_a_captured_bias_however_it_is_indexed(sim_device, chained):
    # Transformers' score_mods index a captured mask chained (mask[b][h][q][kv]); PyTorch's dense
    # backward rejects that when the mask requires grad ("idx shape ... must match value shape").
    import math

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 8, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    bias = torch.randn(2, 2, 8, 8, generator=gen, dtype=torch.float64)
    weights = torch.randn(2, 2, 8, 8, generator=gen, dtype=torch.float64)

    def grads(device, attend):
        leaves = [t.to(device).requires_grad_() for t in (q, k, v, bias)]
        (attend(*leaves) * weights.to(device)).sum().backward()
        return [t.grad.cpu() for t in leaves]

    def flex_on_sim(qs, ks, vs, bs):
        mod = (lambda s, b, h, i, j: s + bs[b][h][i][j]) if chained else (lambda s, b, h, i, j: s + bs[b, h, i, j])
        return _flex(qs, ks, vs, score_mod=mod)

    def dense(qs, ks, vs, bs):
        return torch.softmax(qs @ ks.transpose(-1, -2) / math.sqrt(8) + bs, -1) @ vs

    for got, want in zip(grads("sim", flex_on_sim), grads("cpu", dense)):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
