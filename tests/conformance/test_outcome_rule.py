"""One outcome rule: the same sim condition gives the same status in every suite.

Each suite runs an item whose subject hits `aten.cat.default` on the device (OpInfo `cat`,
the FP8 suite's `movement/cat`, llama's rotary embedding), under one sim profile per
condition; the status must be the one conformance/outcome.py's table gives.
"""

from __future__ import annotations

import pytest

from conformance import backends, outcome
from conformance.engine.config import RunConfig, WorkerContext
from conformance.engine.worker import run_one
from conformance.numerics import Comparison
from conformance.planning import OpsOptions
from op_db.records import Status, WorkItem

OP = "aten.cat.default"
# One item per suite, each of whose runs puts OP on the device; `dtype` is the item's own.
ITEMS = {
    "opinfo": ("cat", "forward", "bfloat16"),
    "fp8": ("movement", "cat", "float8_e5m2"),
    "model": ("llama", "forward", "bfloat16"),
}
CONDITIONS = {
    "unsupported dtype": (lambda dtype: {"unsupported_dtypes": [dtype]}, Status.UNSUPPORTED),
    "unsupported op": (lambda dtype: {"unsupported_ops": [OP]}, Status.UNSUPPORTED),
    "raise": (lambda dtype: {"faults": [{"op": OP, "kind": "raise", "value": "kernel exploded"}]}, Status.ERROR),
    "fallback": (lambda dtype: {"fallback_ops": [OP]}, Status.FALLBACK),
    "scale fault": (lambda dtype: {"faults": [{"op": OP, "kind": "scale", "value": 1000.0}]}, Status.MISMATCH),
    "fault-free": (lambda dtype: {}, Status.PASS),
}


@pytest.fixture(scope="module")
def ctx():
    import conformance.sim as sim

    sim.register()
    adapter = backends.get("sim").init()
    context = WorkerContext(RunConfig(backend="sim", device="sim", suite_options=OpsOptions(max_samples=4)), adapter)
    yield context
    sim.set_profile(None)


@pytest.mark.parametrize("condition", list(CONDITIONS))
@pytest.mark.parametrize("suite", list(ITEMS))
def test_same_condition_same_status_in_every_suite(ctx, use_profile, suite, condition):
    subject, variant, dtype = ITEMS[suite]
    make_profile, expected = CONDITIONS[condition]
    use_profile({"name": condition, **make_profile(dtype)})
    result = run_one(WorkItem(suite, subject, variant, dtype, "eager"), ctx)
    assert result.status is expected, f"{suite} {condition}: {result.status} {result.message}"
    if condition == "raise":
        assert "kernel exploded" in result.message
    if condition in ("unsupported op", "raise"):
        assert result.failing_op == OP


@pytest.mark.parametrize("observed, expected", [
    (outcome.Missing("no bf16"), Status.UNSUPPORTED),
    (outcome.NotApplicable("no samples"), Status.SKIP),
    (outcome.ReferenceFailed("CPU raised"), Status.REF_ERROR),
    (NotImplementedError("aten::sort"), Status.UNSUPPORTED),
    (RuntimeError("\"addmm\" not implemented for 'Half'"), Status.UNSUPPORTED),
    (RuntimeError("shape mismatch in kernel"), Status.ERROR),
    (Comparison(False, "oracle", "too far"), Status.MISMATCH),
    (Comparison(True, "allclose"), Status.PASS),
])
def test_status_of_follows_the_table(observed, expected):
    assert outcome.status_of(observed) is expected


def test_fallback_only_matters_for_a_passing_comparison():
    assert outcome.status_of(Comparison(True, "exact"), fallback=True) is Status.FALLBACK
    assert outcome.status_of(Comparison(False, "exact", "differs"), fallback=True) is Status.MISMATCH
    assert outcome.status_of(RuntimeError("boom"), fallback=True) is Status.ERROR


def test_rule_table_covers_every_status_a_suite_gives():
    engine_only = {Status.CRASH, Status.TIMEOUT}
    assert {status for _, status in outcome.RULES} == set(Status) - engine_only
