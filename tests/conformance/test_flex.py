"""The flex attention suite on sim: fault-free passes, faults in flex's kernel and in a score_mod
primitive are MISMATCH, a refusing backend is UNSUPPORTED with PyTorch's reason."""

from __future__ import annotations

import pytest

import conformance.sim as sim
from conformance import backends
from conformance.engine.config import RunConfig, WorkerContext
from conformance.compiling.settings import CompileSettings
from conformance.flex import run as flex
from conformance.flex.plan import FlexOptions, plan
from conformance.flex.variants import VARIANTS
from op_db.errors import InputError
from op_db.records import Status, WorkItem

FAST = ["none", "causal", "soft_cap", "learned_bias", "block_sparse_50", "gqa", "decode", "return_lse"]


@pytest.fixture(scope="module")
def ctx():
    sim.register()
    adapter = backends.get("sim").init()
    context = WorkerContext(RunConfig(backend="sim", device="sim"), adapter)
    flex.prepare(context)
    return context


def _item(subject, variant="forward", dtype="float32", mode="eager"):
    return WorkItem("flex_attention", subject, variant, dtype, mode)


def test_plan_expands_subjects_dtypes_modes_and_steps():
    items = plan(FlexOptions(subjects=("causal", "block_sparse*"), dtypes=("fp32",), grad=True, modes=("eager", "compile")))
    assert len(items) == 4 * 2 * 2 and {i.suite for i in items} == {"flex_attention"}


def test_plan_refuses_an_unknown_subject_with_one_sentence():
    with pytest.raises(InputError, match="no flex attention variant matches 'casual'"):
        plan(FlexOptions(subjects=("casual",)))


@pytest.mark.parametrize("subject", FAST)
@pytest.mark.parametrize("variant", ["forward", "backward"])
def test_fault_free_sim_passes(ctx, subject, variant):
    result = flex.run_item(_item(subject, variant, "bfloat16"), ctx)
    assert result.status == Status.PASS, result.message
    if variant == "forward":
        assert result.aten_ops["higher_order.flex_attention"] >= 1


@pytest.mark.parametrize("subject", list(VARIANTS))  # every variant runs sim's flex kernels
@pytest.mark.parametrize("variant,op", [("forward", "higher_order.flex_attention"),
                                        ("backward", "higher_order.flex_attention_backward")])
def test_one_percent_scale_on_sims_flex_kernel_is_mismatch(ctx, use_profile, subject, variant, op):
    use_profile({"faults": [{"op": op, "kind": "scale", "value": 1.01}]})
    result = flex.run_item(_item(subject, variant), ctx)
    assert result.status == Status.MISMATCH and result.failing_op == op, result.message


@pytest.mark.parametrize("variant", ["forward", "backward"])
def test_fault_on_tanh_inside_the_soft_cap_score_mod_is_caught(ctx, use_profile, variant):
    use_profile({"faults": [{"op": "aten.tanh.default", "kind": "scale", "value": 1.01}]})
    assert flex.run_item(_item("soft_cap", variant), ctx).status == Status.MISMATCH
    assert flex.run_item(_item("causal", variant), ctx).status == Status.PASS  # no tanh: unaffected


@pytest.mark.parametrize("variant,mode", [("forward", "eager"), ("backward", "eager"), ("backward", "compile")])
def test_refused_flex_attention_is_unsupported_with_pytorchs_reason(ctx, use_profile, variant, mode):
    use_profile({"flex_attention": False})
    result = flex.run_item(_item("causal", variant, mode=mode), ctx)
    assert result.status == Status.UNSUPPORTED
    assert "FlexAttention is only supported on CUDA, CPU, HPU, or MPS devices" in result.message
    assert "device type sim" in result.message


def test_compiled_flex_attention_passes_and_is_caught(ctx, use_profile):
    assert flex.run_item(_item("soft_cap", mode="compile"), ctx).status == Status.PASS
    use_profile({"faults": [{"op": "higher_order.flex_attention", "kind": "scale", "value": 1.01}]})
    assert flex.run_item(_item("soft_cap", mode="compile"), ctx).status == Status.MISMATCH


def _specializing_compiler(gm, example_inputs):
    """A backend compiler that cannot keep a length symbolic: reading each size as an int
    guards the graph on it, so the next length recompiles (a backend with static shapes only)."""
    import torch
    from torch._dynamo.backends.registry import lookup_backend

    for value in example_inputs:
        if isinstance(value, torch.SymInt):
            int(value)
    return lookup_backend("sim")(gm, example_inputs)


@pytest.fixture(scope="module")
def dynamic_ctx(ctx):
    from torch._dynamo.backends.registry import register_backend

    register_backend(_specializing_compiler, name="sim_static_shapes")  # once: dynamo refuses a second

    def make(backend):
        return WorkerContext(RunConfig(backend="sim", device="sim", compile=CompileSettings(backend=backend, dynamic=True)),
                             ctx.adapter, state=ctx.state)
    return make


def test_dynamic_second_length_reuses_the_graph_on_sim(dynamic_ctx, use_profile):
    # A refused compiled item first: the dynamo cache it leaves (a trace cut short) must not
    # count as the next item's recompile.
    use_profile({"flex_attention": False})
    assert flex.run_item(_item("causal", mode="compile"), dynamic_ctx("sim")).status == Status.UNSUPPORTED
    use_profile({})
    result = flex.run_item(_item("causal", mode="compile"), dynamic_ctx("sim"))
    assert result.status == Status.PASS, result.message
    assert result.compile["recompiles"] == 0 and result.compile["calls"] == 2


def test_dynamic_recompile_on_a_second_length_is_flagged(dynamic_ctx):
    result = flex.run_item(_item("causal", mode="compile"), dynamic_ctx("sim_static_shapes"))
    assert result.status == Status.ERROR
    assert result.message == "torch.compile(flex_attention) recompiled under --dynamic for a second length"
    assert result.compile["recompiles"] >= 1 and result.failing_op == "higher_order.flex_attention"
