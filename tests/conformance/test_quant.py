"""The quant suite on sim: a fault-free sim passes; faults in the ops a recipe issues are caught."""

from __future__ import annotations

import pytest

pytest.importorskip("torchao")

import conformance.sim as sim  # noqa: E402
from conformance import backends  # noqa: E402
from conformance.engine.config import RunConfig, WorkerContext  # noqa: E402
from conformance.quant import run as quant  # noqa: E402
from conformance.quant.plan import QuantOptions, plan  # noqa: E402
from op_db.errors import InputError  # noqa: E402
from op_db.records import Status, WorkItem  # noqa: E402

# On sim, both int8 recipes multiply through aten.mm (weight-only: the dequantized weight; dynamic:
# torchao's safe_int_mm off CUDA/CPU, which multiplies the int8 codes as float32; on the CPU it
# is aten._int_mm); intx weight-only multiplies the biased linears through aten.addmm.
MM_SCALE_FAULT = {"faults": [{"op": "aten.mm.default", "dtype": "float32", "kind": "scale", "value": 1.01}]}


def item(recipe: str, target: str = "linear.g64", dtype: str = "float32") -> WorkItem:
    return WorkItem("quant", recipe, target, dtype, "eager")


@pytest.fixture
def ctx():
    sim.register()
    sim.set_profile(None)
    context = WorkerContext(RunConfig(backend="sim", device="sim"), backends.get("sim").init())
    quant.prepare(context)
    yield context
    sim.set_profile(None)


def profile(data: dict) -> None:
    sim.set_profile(sim.load_profile({"name": "test", **data}))


def test_plan_crosses_recipes_targets_and_dtypes():
    items = plan(QuantOptions(recipes=("int8_weight_only", "int8_dynamic_int8_weight"), targets=("linear.g32", "llama"), dtypes=("bf16",)))
    assert [(i.subject, i.variant, i.dtype) for i in items] == [
        ("int8_weight_only", "linear.g32", "bfloat16"), ("int8_weight_only", "llama", "bfloat16"),
        ("int8_dynamic_int8_weight", "linear.g32", "bfloat16"), ("int8_dynamic_int8_weight", "llama", "bfloat16"),
    ]
    training = plan(QuantOptions(recipes=("adamw_8bit",), dtypes=("fp32",), grad=True))
    assert {i.variant for i in training} == {"linear.g64", "linear.3d", "linear.no_bias"}
    with pytest.raises(InputError, match="unknown recipe 'adamw_\\*'"):  # training needs --grad
        plan(QuantOptions(recipes=("adamw_*",)))


@pytest.mark.parametrize("call", [
    lambda: plan(QuantOptions(recipes=("int3_magic",))),
    lambda: plan(QuantOptions(targets=("resnet",))),
    lambda: QuantOptions(dtypes=("int8",)),
])
def test_bad_selection_is_one_sentence(call):
    with pytest.raises(InputError, match=r"\.$"):
        call()


@pytest.mark.parametrize("recipe,target,dtype", [
    ("int8_weight_only", "linear.3d", "bfloat16"), ("int8_dynamic_int8_weight", "linear.decode", "float32"),
    ("intx_weight_only", "linear.g32", "bfloat16"), ("int8_dynamic_intx_weight", "linear.g128", "float32"),
    ("float8_weight_only", "linear.no_bias", "bfloat16"), ("qat_fake_quant", "linear.3d", "float32"),
    ("float8_training", "linear.g64", "bfloat16"), ("adamw_8bit", "linear.g64", "float32"),
    ("int8_weight_only", "vit", "float32"), ("int8_dynamic_int8_weight", "qwen3_moe", "bfloat16"),
])
def test_fault_free_sim_passes(recipe, target, dtype, ctx):
    result = quant.run_item(item(recipe, target, dtype), ctx)
    assert result.status is Status.PASS, (result.first_failure, result.message)
    assert result.samples == result.samples_passed > 0 and result.aten_ops


def test_a_model_torchao_config_leaves_unquantized_is_skip_saying_so(ctx):
    # gpt2's blocks are Conv1D and its head is the output embeddings, which TorchAoConfig keeps
    result = quant.run_item(item("int8_weight_only", "gpt2"), ctx)
    assert result.status is Status.SKIP
    assert result.message.startswith("TorchAoConfig quantized no nn.Linear of gpt2")


def test_quantization_error_is_information_not_failure(ctx):
    result = quant.run_item(item("intx_weight_only"), ctx)
    assert result.status is Status.PASS
    assert 10 < result.extra["sqnr_db"] < 60 and result.extra["quant_max_abs_err"] > 0


def test_float_matmul_scale_fault_fails_the_recipes_that_use_it_only(ctx):
    profile(MM_SCALE_FAULT)
    result = quant.run_item(item("int8_weight_only"), ctx)
    assert result.status is Status.MISMATCH, result.message
    assert result.first_failure.startswith("output")
    # int8 dynamic multiplies the int8 codes through torch's out_dtype operator (an int32 mm,
    # recorded as the higher-order op), so a float32 mm fault does not reach it
    dynamic = quant.run_item(item("int8_dynamic_int8_weight"), ctx)
    assert dynamic.status is Status.PASS and "higher_order.out_dtype" in dynamic.aten_ops
    other = quant.run_item(item("intx_weight_only"), ctx)
    assert other.status is Status.PASS, (other.first_failure, other.message)
    assert "aten.mm.default" not in other.aten_ops


def test_integer_matmul_fault_fails_int8_dynamic_only(ctx):
    # off CUDA, torch's out_dtype operator runs int8 dynamic's int8 x int8 matmul as an int32 aten.mm:
    # one unit more in its int32 accumulator is a wrong kernel; the float recipes never run it
    profile({"faults": [{"op": "aten.mm.default", "dtype": "int32", "kind": "offset", "value": 1}]})
    dynamic = quant.run_item(item("int8_dynamic_int8_weight"), ctx)
    assert dynamic.status is Status.MISMATCH and dynamic.first_failure.startswith("output"), dynamic.message
    for recipe in ("int8_weight_only", "int8_dynamic_intx_weight"):
        other = quant.run_item(item(recipe), ctx)
        assert other.status is Status.PASS, (recipe, other.first_failure, other.message)


def test_float8_training_step_with_a_faulted_scaled_mm_fails(ctx):
    profile({"faults": [{"op": "aten._scaled_mm.default", "kind": "scale", "value": 1.01}]})
    result = quant.run_item(item("float8_training"), ctx)
    assert result.status is Status.MISMATCH, result.message
    # issued inside float8 training's tensor subclass, and recorded there (not as the aten.mm it got)
    assert "aten._scaled_mm.default" in result.aten_ops and "aten.mm.default" not in result.aten_ops


def test_an_op_removed_inside_a_tensor_subclass_is_unsupported_naming_it(ctx):
    profile({"unsupported_ops": ["aten._scaled_mm.default"]})
    result = quant.run_item(item("float8_training"), ctx)
    assert result.status is Status.UNSUPPORTED and result.failing_op == "aten._scaled_mm.default"


def test_a_removed_op_is_unsupported_naming_it(ctx):
    profile({"unsupported_ops": ["aten.round.default"]})
    result = quant.run_item(item("int8_dynamic_int8_weight"), ctx)
    assert result.status is Status.UNSUPPORTED
    assert result.failing_op == "aten.round.default"


def test_a_fallback_op_is_fallback(ctx):
    profile({"fallback_ops": ["aten.mm.default"]})
    result = quant.run_item(item("int8_weight_only"), ctx)
    assert result.status is Status.FALLBACK and "aten.mm.default" in result.fallback_ops


def test_a_wrong_quantized_weight_is_caught_exactly(ctx):
    profile({"faults": [{"op": "aten.round.default", "dtype": "float32", "kind": "offset", "value": 1.0}]})
    result = quant.run_item(item("int8_weight_only"), ctx)
    assert result.status is Status.MISMATCH and result.first_failure.startswith("weight 0.weight.qdata")


def test_recipe_torchao_cannot_build_on_the_cpu_is_skip_with_its_reason(ctx):
    result = quant.run_item(item("float8_dynamic.per_row"), ctx)
    assert result.status is Status.SKIP
    assert result.message.startswith("torchao cannot build float8_dynamic.per_row on the CPU: AssertionError")


def test_compile_mode_compiles_the_quantized_forward_and_catches_a_compile_only_fault(ctx):
    compiled = quant.run_item(WorkItem("quant", "int8_weight_only", "linear.g64", "float32", "compile"), ctx)
    assert compiled.status is Status.PASS, compiled.message
    # a graph really reached the sim compile backend, holding the dequantized weight's matmul
    assert compiled.compile["graphs"] >= 1 and "aten.mm.default" in compiled.compile["graph_ops"]
    profile({"compile_faults": [{"op": "aten.mm.default", "dtype": "float32", "kind": "scale", "value": 1.01}]})
    faulted = quant.run_item(WorkItem("quant", "int8_weight_only", "linear.g64", "float32", "compile"), ctx)
    assert faulted.status is Status.MISMATCH and faulted.first_failure.startswith("output"), faulted.message
    assert quant.run_item(item("int8_weight_only"), ctx).status is Status.PASS  # eager never runs a graph
