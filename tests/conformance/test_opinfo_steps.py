"""Each step of an OpInfo item on its own: setup, samples, reference, device, comparison."""

from __future__ import annotations

import pytest
import torch

from conformance import backends
from conformance.engine.config import RunConfig, WorkerContext
from conformance.numerics import ulp
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


def _values(samples) -> list:
    return [smp.describe_sample(i, s) + repr([t.tolist() for t in smp.sample_tensors(s)]) + repr(s.kwargs)
            for i, s in enumerate(samples)]


def test_samples_drawn_with_python_and_numpy_random_are_the_same_every_time(ctx):
    # hinge_embedding_loss draws its margin with random.uniform; samples made again (the
    # randomness probe, the CPU-argument retry, the next run) must be the ones judged first.
    import random

    import numpy

    setup, _ = setup_for(ctx, "nn.functional.hinge_embedding_loss")
    first = _values(steps.make_samples(setup))
    random.random(), numpy.random.rand()  # what other code does to the global generators meanwhile
    assert _values(steps.make_samples(setup)) == first
    assert any("margin" in s for s in first)


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


def test_compare_step_asks_the_oracle_only_where_it_serves(ctx):
    setup, tally = setup_for(ctx, "mul", torch.bfloat16)
    sample = steps.make_samples(setup)[0]
    ref = steps.run_reference(setup, tally, sample).output
    tally.probed = True  # the outputs below are not mul's: no probe for a random CPU
    asked = []

    def oracle_of(value):
        def oracle():
            asked.append(1)
            return value.double()
        return oracle

    # A floating output: up front, for the ulp statistics, even when it is bit-identical.
    assert steps.compare_sample(setup, tally, 0, ref.clone(), ref, None, oracle_of(ref)).ok
    assert asked == [1] and len(tally.identical_leaves) == 1
    # An output the statistics cannot measure (integers): only when the plain check fails.
    ints = (ref * 4).to(torch.int64)
    assert steps.compare_sample(setup, tally, 0, ints.clone(), ints, None, oracle_of(ints)).ok
    assert asked == [1]
    wrong = steps.compare_sample(setup, tally, 0, ints + 1, ints, None, oracle_of(ints))
    assert not wrong.ok and asked == [1, 1] and tally.total is not None and not tally.total.ok


def test_item_numerics_folds_identical_samples_and_judges_the_lean(ctx):
    setup, tally = setup_for(ctx, "mul", torch.bfloat16)
    tally.probed = True  # the outputs below are not mul's: no probe for a random CPU
    hi = torch.linspace(1, 2, 512, dtype=torch.float64) + 2.0 ** -10  # between bfloat16 values
    steps.compare_sample(setup, tally, 0, hi.bfloat16(), hi.bfloat16(), None, lambda: hi)
    truncated = ulp.round_toward_zero(hi, torch.bfloat16).bfloat16()
    steps.compare_sample(setup, tally, 1, truncated, hi.bfloat16(), None, lambda: hi)
    judged = steps.item_numerics(setup, tally)
    assert tally.identical_leaves == [] and judged.numerics.device.n == 1024
    assert not judged.ok and judged.rule == "bias" and "round-toward-zero" in judged.reason


def test_run_sample_chains_the_steps(ctx, use_profile):
    setup, tally = setup_for(ctx, "mul", torch.bfloat16)
    sample = steps.make_samples(setup)[0]
    use_profile({"name": "scale", "faults": [{"op": "aten.mul.Tensor", "kind": "scale", "value": 1.5}]})
    outcome = steps.run_sample(setup, tally, 0, sample)
    assert outcome.error is None and not outcome.comparison.ok
    assert outcome.ops == {"aten.mul.Tensor": 1}
