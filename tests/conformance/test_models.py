"""The Transformers model suite on the sim device: it passes healthy models and catches faults."""

from __future__ import annotations

import pytest

from op_db.errors import InputError
from conformance.models import judges, passes
from op_db.records import Status, WorkItem

SILU_FAULT = {"name": "silu-scale",
              "faults": [{"op": "aten.silu.default", "dtype": "float32", "kind": "scale", "value": 1.05}]}


def run(models_ctx, model_type, variant="forward", dtype="float32", mode="eager"):
    from conformance.models import runner

    return runner.run_item(WorkItem("model", model_type, variant, dtype, mode), models_ctx)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("model_type", ["llama", "gpt2", "bert", "t5", "vit"])
def test_fault_free_sim_passes_forward(models_ctx, use_profile, model_type, dtype):
    result = run(models_ctx, model_type, dtype=dtype)
    assert result.status is Status.PASS, result.message
    assert result.samples == result.samples_passed == 1
    assert result.aten_ops and all(name.startswith("aten.") for name in result.aten_ops)
    assert result.err_ratio is not None


def test_silu_scale_fault_is_caught_at_the_llama_mlp_activation(models_ctx, use_profile):
    use_profile(SILU_FAULT)
    llama = run(models_ctx, "llama")
    assert llama.status is Status.MISMATCH
    assert llama.divergence == "model.layers.0.mlp.act_fn (SiLUActivation)"
    assert llama.extra["divergence"]["module"] == "model.layers.0.mlp.act_fn"
    # The activation ran one computing op itself, so that op is named (issue 31, item 4).
    assert llama.extra["divergence"]["ops"] == ["aten.silu.default"]
    assert llama.failing_op == "aten.silu.default"
    assert "router_flip" not in llama.extra
    assert llama.aten_ops["aten.silu.default"] >= 2  # one per layer
    gpt2 = run(models_ctx, "gpt2")  # gelu, no silu: the fault does not touch it
    assert gpt2.status is Status.PASS, gpt2.message


def test_silu_fault_restricted_to_fp32_spares_bf16(models_ctx, use_profile):
    use_profile(SILU_FAULT)
    assert run(models_ctx, "llama", dtype="bfloat16").status is Status.PASS


def test_unsupported_op_is_named(models_ctx, use_profile):
    use_profile({"name": "no-rsqrt", "unsupported_ops": ["aten.rsqrt.default"]})
    result = run(models_ctx, "llama")
    assert result.status is Status.UNSUPPORTED
    assert result.failing_op == "aten.rsqrt.default"
    assert "rsqrt" in result.message


def test_fallback_op_gives_fallback(models_ctx, use_profile):
    use_profile({"name": "gelu-on-cpu", "fallback_ops": ["aten.gelu.default"]})
    result = run(models_ctx, "bert")
    assert result.status is Status.FALLBACK
    assert result.fallback_ops == ["aten.gelu.default"]


def test_backward_compares_every_gradient_and_catches_a_fault(models_ctx, use_profile):
    healthy = run(models_ctx, "llama", variant="backward")
    assert healthy.status is Status.PASS, healthy.message
    assert healthy.samples == healthy.samples_passed > 10
    use_profile(SILU_FAULT)
    faulty = run(models_ctx, "llama", variant="backward")
    assert faulty.status is Status.MISMATCH
    assert faulty.first_failure.startswith("grad ")


def test_generate_matches_greedy_tokens_and_reports_first_difference(models_ctx, use_profile):
    assert run(models_ctx, "gpt2", variant="generate").status is Status.PASS
    use_profile({"name": "big-scale", "faults": [{"op": "aten.addmm.default", "kind": "scale", "value": 3.0}]})
    faulty = run(models_ctx, "gpt2", variant="generate")
    assert faulty.status is Status.MISMATCH
    assert faulty.first_failure.startswith("position ")
    assert "generated tokens differ first at position" in faulty.message


def test_generate_is_skipped_for_encoders(models_ctx):
    result = run(models_ctx, "vit", variant="generate")
    assert result.status is Status.SKIP


def test_model_that_cannot_be_built_is_a_ref_error(models_ctx, monkeypatch):
    from conformance.models import overrides

    monkeypatch.setitem(overrides.CONFIG_OVERRIDES, "gpt2", {"n_embd": 30, "n_head": 4})  # 30 % 4 != 0
    result = run(models_ctx, "gpt2")
    assert result.status is Status.REF_ERROR
    assert result.message.startswith("build failed: ")
    assert result.extra["stage"] == "build"


def test_unknown_model_type_is_skipped(models_ctx):
    assert run(models_ctx, "no-such-model").status is Status.SKIP


def test_router_divergence_is_reported_as_a_router_flip():
    import torch

    from conformance.models.first_divergence import _Call, first_divergence

    same = [torch.ones(3)]
    ref = [_Call(("model.layers.0.mlp.gate", 1), "MixtralTopKRouter", same, [torch.tensor([0, 1])])]
    dev = [_Call(("model.layers.0.mlp.gate", 1), "MixtralTopKRouter", same, [torch.tensor([1, 0])])]
    found = first_divergence(dev, ref, [])
    assert found.module == "model.layers.0.mlp.gate" and found.router


def test_divergence_skips_modules_whose_inputs_already_differ():
    import torch

    from conformance.models.first_divergence import _Call, first_divergence

    a, b = [torch.zeros(4)], [torch.ones(4)]
    ref = [_Call(("inner", 1), "Linear", a, a), _Call(("outer", 1), "Block", a, a)]
    dev = [_Call(("inner", 1), "Linear", b, b), _Call(("outer", 1), "Block", a, b)]
    found = first_divergence(dev, ref, [])
    assert (found.module, found.class_name, found.router) == ("outer", "Block", False)


def test_plan_expands_variants_dtypes_and_modes():
    from conformance.models.plan import ModelOptions, plan

    items = plan(ModelOptions(archs=("llama", "vit"), tasks=("causal-lm", "image-classification"),
                              dtypes=("fp32", "bf16"), grad=True, generate=True, modes=("eager",)))
    assert WorkItem("model", "llama", "generate", "bfloat16", "eager") in items
    assert WorkItem("model", "vit", "backward", "float32", "eager") in items
    assert not any(i.subject == "vit" and i.variant == "generate" for i in items)
    assert len(items) == 2 * 3 + 2 * 2
    every_task = plan(ModelOptions(archs=("llama",), dtypes=("fp32",)))
    assert {i.subject for i in every_task} >= {"llama", "llama:token-classification", "llama:base"}


def test_plan_rejects_bad_choices():
    from conformance.models.plan import ModelOptions, plan

    with pytest.raises(InputError, match="no model type matches"):
        plan(ModelOptions(archs=("nonexistent*",)))
    with pytest.raises(InputError, match="unknown task"):
        plan(ModelOptions(tasks=("speech",)))
    with pytest.raises(InputError, match="fp32, bf16 or fp16"):
        plan(ModelOptions(archs=("llama",), dtypes=("fp64",)))


def test_zoo_gives_each_type_one_task_by_precedence():
    from conformance.models import zoo

    entries = zoo.catalogue()
    assert entries["llama"].task == "causal-lm"
    assert entries["t5"].task == "seq2seq-lm"  # also a sequence classifier: seq2seq wins
    assert entries["vit"].task == "image-classification"
    assert entries["llava"].task == "image-text-to-text"
    from conformance.models.tasks import tasks

    assert {e.task for e in entries.values()} <= set(tasks())
    assert entries["bert"].task == "causal-lm" and zoo.pairs()["bert:token-classification"].primary is False
    chosen = [e.model_type for e in zoo.select(["gpt*"], ["causal-lm"])]
    assert "gpt2" in chosen and all(name.startswith("gpt") for name in chosen)


def _cpu_forward(model_type):
    import torch

    from conformance.models import zoo
    from conformance.models.inputs import make_inputs

    entry = zoo.catalogue()[model_type]
    model = zoo.build_model(entry)
    inputs = make_inputs(entry.task, model.config, 0, model=model)
    with torch.no_grad():
        return model, inputs, model(**inputs)


def test_per_layer_fields_keep_one_layer_of_each_kind():
    from conformance.models import zoo

    text = zoo.build_config(zoo.catalogue()["gemma4"]).text_config
    assert text.num_hidden_layers == 2
    assert text.layer_types == ["sliding_attention", "full_attention"]
    # the full-attention layer's own head_dim moved with it from index 5 to index 1, shrunk
    assert text.to_dict()["per_layer_config"] == {"1": {"head_dim": 32}}
    zamba2 = zoo.build_config(zoo.catalogue()["zamba2"])
    assert zamba2.num_hidden_layers == len(zamba2.layers_block_type) == len(set(zamba2.layers_block_type))


@pytest.mark.parametrize("model_type", ["bamba", "mamba2", "deepseek_v2"])
def test_hybrid_ssm_and_moe_types_build_and_run_tiny(model_type):
    import torch

    model, _, out = _cpu_forward(model_type)
    assert out.logits.shape[:2] == (2, 8) and torch.isfinite(out.logits).all()
    assert sum(p.numel() for p in model.parameters()) < 2_000_000


@pytest.mark.parametrize("model_type", ["llava", "qwen2_vl"])
def test_image_text_inputs_carry_one_token_per_vision_feature(model_type):
    from conformance.models.inputs import image_token_id

    model, inputs, out = _cpu_forward(model_type)
    tokens = (inputs["input_ids"] == image_token_id(model.config)).sum(dim=1)
    assert tokens.min() == tokens.max() > 0  # every sample holds one whole image
    assert out.logits.shape[:2] == inputs["input_ids"].shape


def _oracle_with_nan(monkeypatch):
    """The float64 oracle breaks down (a NaN loss) while the CPU's run stays finite."""
    from conformance.models import runner

    make_oracle = runner._oracle_copy

    def broken(base):
        model = make_oracle(base)
        def nan_loss(module, args, out):
            out.loss = out.loss * float("nan")  # NaN gradients follow
            return out

        model.register_forward_hook(nan_loss)
        return model

    monkeypatch.setattr(runner, "_oracle_copy", broken)


def test_oracle_that_breaks_down_gives_way_to_a_float32_oracle(models_ctx, use_profile, monkeypatch):
    _oracle_with_nan(monkeypatch)
    healthy = run(models_ctx, "gpt2", variant="backward", dtype="bfloat16")
    assert healthy.status is Status.PASS, healthy.message
    assert healthy.extra["oracle"].startswith("float64 oracle unusable: NaN at ['loss']")
    assert healthy.extra["oracle"].endswith("float32 oracle used")
    use_profile({"name": "mm-scale", "faults": [{"op": "aten.mm.default", "dtype": "bfloat16", "kind": "scale",
                                                 "value": 1.02}]})
    assert run(models_ctx, "gpt2", variant="backward", dtype="bfloat16").status is Status.MISMATCH


def test_a_loss_that_is_not_a_scalar_is_differentiated_through_its_sum():
    import types

    import torch

    from conformance.models import runner

    class PerSampleLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.tensor([1.0, 2.0]))

        def forward(self, x):
            return types.SimpleNamespace(loss=(self.weight * x).sum(-1))

    out = passes.run_backward(PerSampleLoss(), {"x": torch.tensor([[1.0, 1.0], [3.0, 5.0]])})
    assert out["loss"].item() == 16.0 and not out["surrogate"]
    assert out["grads"]["weight"].tolist() == [4.0, 6.0]


SIGMOID_FAULT = {"name": "sigmoid-scale",
                 "faults": [{"op": "aten.sigmoid.default", "dtype": "bfloat16", "kind": "scale", "value": 1.01}]}


def _silu_backward_on_sim(models_ctx):
    """A tiny SiLU MLP's gradients in bfloat16: sim, without a fused silu_backward, runs
    PyTorch's composite formula (sigmoid, mul, add) where the CPU runs its fused kernel."""
    import torch

    from conformance.models import runner

    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.SiLU(), torch.nn.Linear(32, 4))
    inputs = {"input": torch.randn(8, 16)}
    item = WorkItem("model", "toy", "backward", "bfloat16", "eager")
    ref = runner._on_cpu(passes.run_backward, runner._copy(base, "cpu", torch.bfloat16), inputs, torch.bfloat16, 0)
    hi = runner._on_cpu(passes.run_backward, runner._copy(base, "cpu", torch.float64), inputs, torch.float64, 0)
    device_run = runner._DeviceRun(models_ctx, item, passes.run_backward, base, inputs, torch.bfloat16, 0)
    assert device_run.execute() is None
    assert "aten.sigmoid.default" in device_run.ops and "aten.silu_backward.default" not in device_run.ops
    return device_run, ref, hi


def test_composite_implementation_is_judged_by_its_own_replayed_error(models_ctx, use_profile):
    from conformance.models import runner
    from conformance.models.composite import against_composite
    from conformance.numerics import Comparison

    failed = Comparison(False, "rmse", "as if the CPU's fused kernel had set the bound")
    device_run, ref, hi = _silu_backward_on_sim(models_ctx)
    passed = against_composite(device_run, ref, hi, failed, judges.judge_grads)
    assert passed.ok and passed.rule != "rmse"  # judged again, with the replay as the second reference
    use_profile(SIGMOID_FAULT)  # a fault in one primitive of the composite still fails
    device_run, ref, hi = _silu_backward_on_sim(models_ctx)
    caught = against_composite(device_run, ref, hi, failed, judges.judge_grads)
    assert not caught.ok and "primitive aten.sigmoid.default of the device's op sequence fails" in caught.reason


def test_tied_weights_that_came_apart_on_the_device_are_named_as_such():
    import torch

    from conformance.models import runner

    grads = {"embed.weight": torch.ones(2)}
    untied = judges.judge_grads({"grads": {**grads, "head.weight": torch.ones(2)}}, {"grads": grads}, None)
    assert not untied.ok and untied.reason.startswith("gradients present on one side only: head.weight (on the device "
                                                      "only: parameters the CPU's model shares, tied weights")
    lost = judges.judge_grads({"grads": {}}, {"grads": grads}, None)
    assert lost.reason == "gradients present on one side only: embed.weight"


def test_oracle_that_cannot_run_gives_way_to_a_float32_oracle(models_ctx, monkeypatch):
    from conformance.models import runner

    make_oracle = runner._oracle_copy

    def refusing(base):  # a model with a float32 constant inside cannot run in float64
        model = make_oracle(base)
        model.register_forward_pre_hook(lambda module, args: (_ for _ in ()).throw(RuntimeError("expected scalar type Float")))
        return model

    monkeypatch.setattr(runner, "_oracle_copy", refusing)
    result = run(models_ctx, "gpt2", dtype="bfloat16")
    assert result.status is Status.PASS, result.message
    assert result.extra["oracle"] == ("float64 oracle unavailable: RuntimeError: expected scalar type Float; "
                                      "float32 oracle used")


MM_FAULT = {"name": "mm-1pct", "faults": [{"op": "aten.mm.default", "dtype": "float32", "kind": "scale", "value": 1.01}]}


@pytest.mark.parametrize("variant", ["forward", "backward"])
def test_a_one_percent_mm_fault_is_caught_with_the_device_copy_made_outside_the_recorder(models_ctx, use_profile,
                                                                                         variant):
    # The device's deep copy of the model is made before the op recorder starts (runner.execute):
    # the move onto the device is still recorded, and a 1% fault in a matmul still fails.
    use_profile(MM_FAULT)
    result = run(models_ctx, "llama", variant=variant)
    assert result.status is Status.MISMATCH, result.message
    assert result.aten_ops["aten.mm.default"] >= 1
    assert result.aten_ops["aten._to_copy.default"] >= 1
