"""The zoo through flex attention (`models --attn flex_attention`): a type that attends through
flex passes on sim against the same weights attending eagerly on the CPU, a fault in sim's flex
kernel is caught, and a type Transformers cannot build with flex is SKIP before it is built."""

from __future__ import annotations

import pytest

from op_db.records import Status, WorkItem


@pytest.fixture(scope="module")
def flex_ctx():
    from conformance import backends
    from conformance.engine.config import RunConfig, WorkerContext
    from conformance.models import runner
    from conformance.models.plan import ModelOptions

    adapter, device = backends.resolve("sim")
    adapter.init()
    config = RunConfig(backend="sim", device=device, suite_options=ModelOptions(attn="flex_attention"))
    context = WorkerContext(config, adapter)
    runner.prepare(context)
    return context


def run(ctx, model_type, variant="forward"):
    from conformance.models import runner

    return runner.run_item(WorkItem("model", model_type, variant, "float32", "eager"), ctx)


def test_flex_model_passes_and_its_attention_ran_through_flex_on_the_device(flex_ctx, use_profile):
    result = run(flex_ctx, "llama", "backward")
    assert result.status is Status.PASS, result.message
    # The device really attended through flex (forward and backward HOPs), not eagerly.
    assert result.aten_ops.get("higher_order.flex_attention", 0) >= 1, sorted(result.aten_ops)
    assert result.aten_ops.get("higher_order.flex_attention_backward", 0) >= 1


def test_fault_in_sims_flex_kernel_is_a_mismatch(flex_ctx, use_profile):
    use_profile({"faults": [{"op": "higher_order.flex_attention", "kind": "scale", "value": 1.05}]})
    result = run(flex_ctx, "qwen2")
    assert result.status is Status.MISMATCH, result.message


def test_sim_refusing_flex_is_unsupported_not_a_model_bug(flex_ctx, use_profile):
    use_profile({"flex_attention": False})
    result = run(flex_ctx, "llama")
    assert result.status is Status.UNSUPPORTED, result.message
    assert "sim" in result.message


def test_type_without_flex_support_is_skipped_with_transformers_reason(flex_ctx):
    result = run(flex_ctx, "gpt2")
    assert result.status is Status.SKIP
    assert "_supports_flex_attn" in result.message


def test_type_with_a_part_transformers_cannot_attend_through_flex_is_skipped(flex_ctx):
    # Aria's class supports flex, its text model does not: Transformers refuses when it is set.
    result = run(flex_ctx, "aria")
    assert result.status is Status.SKIP, result.message
    assert "does not support an attention implementation through torch's flex_attention" in result.message


def test_model_whose_flex_path_fails_on_the_cpu_too_is_a_model_bug_not_the_backends(flex_ctx):
    # T5's flex score_mod indexes a batch-1 position bias by the batch index: it fails on the
    # CPU with no tool in the way (Transformers 5.25), so the device is not blamed.
    result = run(flex_ctx, "t5")
    assert result.status is Status.REF_ERROR, result.message
    assert result.message.startswith("model bug on CPU: its flex_attention path fails on the CPU too")
    assert "IndexError" in result.message


DISAGREES = "model bug on CPU: its flex_attention path disagrees with its eager path on the CPU, without the tool"


def test_model_whose_score_mod_indexes_a_mask_that_requires_grad_runs_backward(flex_ctx):
    # Doge's score_mod reads its learned dynamic mask as mask[b][h][q][kv]: PyTorch's dense flex
    # backward rejected that chained indexing ("idx shape ... must match value shape"), an ERROR;
    # sim's backward runs it. Doge's flex path drops the causal BlockMask for its dynamic mask, so
    # it computes another function than its eager path: REF_ERROR, never a MISMATCH of the device
    # (it used to PASS only by rule 6, the device's own flex ops replayed on the CPU).
    result = run(flex_ctx, "doge", "backward")
    assert result.status is Status.REF_ERROR, result.message
    assert result.message.startswith(DISAGREES)
    assert result.aten_ops.get("higher_order.flex_attention_backward", 0) >= 1


def test_model_whose_flex_path_reads_one_heads_bias_is_a_model_bug_not_a_mismatch(flex_ctx):
    # Transformers' flex integration adds head 0 of an additive mask to every head; Parakeet's
    # mask is its per-head relative-position scores, so the gradient of relative_k_proj differed
    # on a fault-free device (MISMATCH before the CPU's two paths were compared).
    result = run(flex_ctx, "parakeet_rnnt", "backward")
    assert result.status is Status.REF_ERROR, result.message
    assert result.message.startswith(DISAGREES)
    assert result.extra["stage"] == "flex on the CPU"


def test_fault_in_the_flex_kernel_of_a_model_whose_paths_agree_is_still_a_mismatch(flex_ctx, use_profile):
    # The paths check runs only after a failed comparison; llama's paths agree, so the fault stands.
    use_profile({"faults": [{"op": "higher_order.flex_attention_backward", "kind": "scale", "value": 1.05}]})
    result = run(flex_ctx, "llama", "backward")
    assert result.status is Status.MISMATCH, result.message
