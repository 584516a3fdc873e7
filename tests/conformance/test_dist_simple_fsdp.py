"""SimpleFSDP and context-parallel SDPA on sim: SimpleFSDP passes eager and compiled with sim's
compiler, and a reduce-scatter fault (its gradients) is MISMATCH in both modes and for the
distributed checkpoint's FSDP2 run; context parallel
is UNSUPPORTED with PyTorch's own reason, and its judge passes a correct blockwise attention and
catches a wrong gradient."""

from __future__ import annotations

import pytest

from op_db.records import Status, WorkItem

torch = pytest.importorskip("torch")

from conformance.dist import context_parallel  # noqa: E402
from tests.conformance.test_dist import run  # noqa: E402


def simple_fsdp(mode, dtype="float32"):
    return WorkItem("dist", "parity.simple_fsdp", "train2", dtype, mode)


def test_simple_fsdp_passes_eager_and_compiled_and_cp_is_unsupported_with_pytorchs_reason(tmp_path):
    cp = WorkItem("dist", "parity.cp_sdpa", "causal", "float32", "eager")
    chosen = [simple_fsdp("eager"), simple_fsdp("compile"), cp]
    results, _ = run(chosen, tmp_path)
    for mode in ("eager", "compile"):
        assert results[simple_fsdp(mode)].status is Status.PASS, results[simple_fsdp(mode)].message
    compiled = results[simple_fsdp("compile")].compile
    assert compiled["backend"] == "sim" and compiled["graphs"] >= 1
    # The all-gathers and reduce-scatters are in the graphs sim's compiler received.
    assert any("all_gather_into_tensor" in op for op in compiled["graph_ops"])
    assert results[cp].status is Status.UNSUPPORTED
    assert "SDPA on sim takes the math path" in results[cp].message
    assert "aten.add.Tensor got mixed torch.Tensor and DTensor" in results[cp].message
    assert results[cp].extra["sdpa_kernel"] == "math"


def test_a_reduce_scatter_fault_is_mismatch_eager_and_compiled(tmp_path):
    # The distributed checkpoint's FSDP2 run reduce-scatters its gradients too: caught before the save.
    profile = {"collective_faults": [{"op": "reduce_scatter*", "kind": "scale", "value": 1.5}]}
    chosen = [simple_fsdp("eager"), simple_fsdp("compile"), WorkItem("dist", "parity.dcp", "train2", "float32", "eager")]
    results, _ = run(chosen, tmp_path, profile)
    assert {i: r.status for i, r in results.items()} == dict.fromkeys(chosen, Status.MISMATCH)
    # The first step's loss is right (the fault acts on its gradients); the second's is not.
    assert {r.divergence for r in results.values()} == {"loss"}


def blockwise_attention(tensors, blocks):
    """Causal attention one query block at a time against the keys up to its end, as a ring
    of `blocks` ranks computes it: the same values as whole attention, in another order."""
    query, key, value, weight = (t.detach().clone().requires_grad_() for t in tensors)
    step = query.shape[2] // blocks
    outs = []
    for b in range(blocks):
        end = (b + 1) * step
        q = query[:, :, b * step:end]
        outs.append(torch.nn.functional.scaled_dot_product_attention(
            q, key[:, :, :end], value[:, :, :end],
            attn_mask=torch.ones(step, end, dtype=torch.bool).tril(diagonal=b * step)))
    out = torch.cat(outs, dim=2)
    (out * weight).sum().backward()
    return [out.detach(), query.grad, key.grad, value.grad]


def test_context_parallel_judge_passes_blockwise_attention_and_names_a_wrong_gradient():
    tensors = context_parallel.inputs(0, 16, torch.float32)
    ref = context_parallel.reference(tensors, torch.float32)
    hi = context_parallel.reference(tensors, torch.float64)
    dev = blockwise_attention(tensors, 2)
    item = WorkItem("dist", "parity.cp_sdpa", "causal", "float32", "eager")
    assert context_parallel.judge(item, dev, ref, hi, [], 0.0).status is Status.PASS
    dev[2] = dev[2] * 1.01
    wrong = context_parallel.judge(item, dev, ref, hi, [], 0.0)
    assert wrong.status is Status.MISMATCH and wrong.divergence == "key gradient"
