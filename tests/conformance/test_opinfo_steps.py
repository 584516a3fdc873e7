"""Each step of an OpInfo item on its own: setup, samples, reference, device, comparison."""

from __future__ import annotations

import pytest
import torch

from conformance import backends
from conformance.config import RunConfig, WorkerContext
from conformance.opinfo import run as opinfo_run
from conformance.opinfo import samples as smp
from conformance.opinfo import steps
from conformance.planning import OpsOptions


@pytest.fixture(scope="module")
def ctx(sim_device):
    adapter = backends.get("sim").init()
    context = WorkerContext(RunConfig(backend="sim", device="sim", suite_options=OpsOptions(max_samples=3)), adapter)
    opinfo_run.prepare(context)
    return context


def setup_for(ctx, name: str, dtype=torch.float32, backward: bool = False):
    op = ctx.state["opinfo"][name]
    return steps.setup_item(op, dtype, backward=backward, compiled=False, ctx=ctx, options=OpsOptions(max_samples=3))


def test_setup_is_per_item_and_samples_are_seeded(ctx):
    setup, tally = setup_for(ctx, "mul", torch.bfloat16)
    assert setup.oracle_dtype is torch.float64 and setup.device == "sim" and tally.kind == "deterministic"
    first, again = steps.make_samples(setup), steps.make_samples(setup)
    assert 0 < len(first) <= 3
    assert all(torch.equal(a.input, b.input) for a, b in zip(first, again))


def test_reference_gives_cotangents_for_backward(ctx):
    setup, tally = setup_for(ctx, "mul", backward=True)
    sample = steps.make_samples(setup)[0]
    reference = steps.run_reference(setup, tally, sample)
    assert reference.cotangents and all(isinstance(g, torch.Tensor) for g in reference.output if g is not None)
    assert tally.op_time > 0


def test_device_step_records_ops_and_the_op_that_raised(ctx, use_profile):
    setup, tally = setup_for(ctx, "mul")
    sample = steps.make_samples(setup)[0]
    use_profile({"name": "raise", "faults": [{"op": "aten.mul.Tensor", "kind": "raise", "value": "boom"}]})
    run = steps.run_on_device(setup, tally, smp.to_device(sample, "sim"), None)
    assert isinstance(run.error, RuntimeError) and "boom" in str(run.error)
    assert run.failing_op == "aten.mul.Tensor" and tally.aten_ops == {}
    use_profile({"name": "clean"})
    run = steps.run_on_device(setup, tally, smp.to_device(sample, "sim"), None)
    assert run.error is None and run.output.device.type == "cpu"
    assert tally.aten_ops["aten.mul.Tensor"] == 1


def test_compare_step_asks_the_oracle_only_when_the_plain_check_fails(ctx):
    setup, tally = setup_for(ctx, "mul", torch.bfloat16)
    sample = steps.make_samples(setup)[0]
    ref = steps.run_reference(setup, tally, sample).output
    asked = []

    def oracle():
        asked.append(1)
        return ref.double()

    assert steps.compare_sample(setup, tally, 0, ref.clone(), ref, None, oracle).ok
    assert asked == []
    wrong = steps.compare_sample(setup, tally, 0, ref * 1.5, ref, None, oracle)
    assert not wrong.ok and asked == [1] and tally.total is not None and not tally.total.ok


def test_run_sample_chains_the_steps(ctx, use_profile):
    setup, tally = setup_for(ctx, "mul", torch.bfloat16)
    sample = steps.make_samples(setup)[0]
    use_profile({"name": "scale", "faults": [{"op": "aten.mul.Tensor", "kind": "scale", "value": 1.5}]})
    outcome = steps.run_sample(setup, tally, 0, sample)
    assert outcome.error is None and not outcome.comparison.ok
    assert outcome.ops == {"aten.mul.Tensor": 1}
