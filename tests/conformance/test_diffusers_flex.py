"""The Diffusers classes that attend through flex attention: their CPU reference attends by explicit
math (flex_reference.py), so their backwards are judged (PyTorch has no flex backward on the CPU),
and a fault in the device's flex kernels is caught in them."""

from __future__ import annotations

import pytest
import torch

from op_db.records import Status, WorkItem

pytest.importorskip("diffusers")

FLEX_CLASS = "Kandinsky6SRTransformer3DModel"  # NABLA sparsity as a BlockMask, flex backend only


def run(models_ctx, class_name, variant):
    from conformance.models import runner

    return runner.run_item(WorkItem("model", f"diffusers:{class_name}", variant, "float32", "eager"), models_ctx)


def _outputs(result):
    return list(result) if isinstance(result, tuple) else [result]


@pytest.mark.parametrize("name", ["none", "causal", "document", "alibi", "soft_cap", "learned_bias",
                                  "block_sparse_50", "gqa", "odd_length", "decode", "return_lse"])
def test_explicit_math_is_flex_attention_forward_and_backward(name, sim_device):
    from conformance.flex import variants as fv
    from conformance.models.diffusers.flex_reference import dense_flex
    from torch.nn.attention.flex_attention import flex_attention

    cpu = fv.sample(name, 0).on("cpu", torch.float64, True)
    dense = _outputs(fv.run_flex(cpu, dense_flex))
    with torch.no_grad():  # PyTorch's own flex on the CPU: forward only
        stock = _outputs(fv.run_flex(fv.sample(name, 0).on("cpu", torch.float64, False), flex_attention))
    for mine, theirs in zip(dense, stock):
        torch.testing.assert_close(mine, theirs)
    # the gradients against sim's flex backward (autograd through PyTorch's dense kernel)
    device = fv.sample(name, 0).on("sim", torch.float64, True)
    flexed = _outputs(fv.run_flex(device, flex_attention))
    cotangents = [torch.randn_like(t) for t in dense]
    mine = torch.autograd.grad(dense, cpu.grad_inputs(), cotangents)
    theirs = torch.autograd.grad(flexed, device.grad_inputs(), [c.to("sim") for c in cotangents])
    for a, b in zip(mine, theirs):
        torch.testing.assert_close(a, b.cpu())


def test_flex_class_backward_is_judged_against_the_explicit_math_reference(models_ctx, use_profile):
    # Was REF_ERROR: "FlexAttention does not support backward on CPU", where the reference ran.
    result = run(models_ctx, FLEX_CLASS, "backward")
    assert result.status is Status.PASS, result.message
    # the device attended through its own flex kernels, not the explicit math
    assert result.aten_ops.get("higher_order.flex_attention_backward", 0) >= 1


def test_fault_in_the_flex_backward_kernel_is_a_mismatch_of_the_class(models_ctx, use_profile):
    use_profile({"faults": [{"op": "higher_order.flex_attention_backward", "kind": "scale", "value": 1.05}]})
    result = run(models_ctx, FLEX_CLASS, "backward")
    assert result.status is Status.MISMATCH, result.message


def test_explicit_math_is_for_cpu_calls_only_and_is_undone(sim_device, monkeypatch):
    import torch.nn.attention.flex_attention as api

    from conformance.models.diffusers.flex_reference import dense_flex_on_cpu

    calls = []
    monkeypatch.setattr(api, "flex_attention", lambda q, k, v, **kw: calls.append(q.device.type) or q)
    stock = api.flex_attention
    q = torch.randn(1, 2, 16, 16)
    with dense_flex_on_cpu():
        dense = api.flex_attention(q, q, q)
        api.flex_attention(q.to("sim"), q.to("sim"), q.to("sim"))
    assert calls == ["sim"]  # the device's call reached PyTorch's function, the CPU's did not
    assert not torch.equal(dense, q)  # the CPU's was attention, not the stand-in
    assert api.flex_attention is stock
