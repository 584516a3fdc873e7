"""The FP8 suite on the sim device: a fault-free sim passes; injected faults are caught."""

from __future__ import annotations

import pytest

import conformance.sim as sim
from conformance import backends
from conformance.fp8 import run as fp8
from conformance.fp8.plan import plan as fp8_plan
from conformance.engine.config import RunConfig, WorkerContext
from op_db.errors import InputError
from op_db.records import Status, WorkItem

CORE_SUBJECTS = ["cast", "scaled_mm", "movement"]
E4M3, E5M2 = "float8_e4m3fn", "float8_e5m2"
# Adds 2**-10 to every e4m3fn result: odd codes just above 2**-9 round up to the next even one.
ROUNDING_SHIFT = {"faults": [{"op": "aten._to_copy.default", "dtype": E4M3, "kind": "offset", "value": 2.0 ** -10}]}


def make_ctx() -> WorkerContext:
    adapter = backends.get("sim").init()
    ctx = WorkerContext(RunConfig(backend="sim", device="sim"), adapter)
    fp8.prepare(ctx)
    return ctx


@pytest.fixture
def ctx():
    sim.register()
    sim.set_profile(None)
    yield make_ctx()
    sim.set_profile(None)


@pytest.fixture
def profile():
    """Activate a sim profile given as a dict; the fault-free sim is restored afterwards."""
    sim.register()

    def activate(data: dict) -> None:
        sim.set_profile(sim.load_profile({"name": "test", **data}))

    yield activate
    sim.set_profile(None)


def run_all(items, ctx):
    return {item: fp8.run_item(item, ctx) for item in items}


# -- planning -------------------------------------------------------------------


def test_plan_expands_fp8_to_every_format_and_subject():
    items = fp8_plan(["fp8"], mode="eager", subjects=CORE_SUBJECTS)
    assert {i.dtype for i in items} == {"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"}
    per_dtype = [i for i in items if i.dtype == E4M3]
    assert [(i.subject, i.variant) for i in per_dtype] == [
        ("cast", "from_float32"), ("cast", "from_bfloat16"), ("cast", "from_float16"),
        ("cast", "to_float32"), ("cast", "to_bfloat16"), ("cast", "to_float16"),
        ("scaled_mm", "per_tensor"), ("scaled_mm", "rowwise"),
        ("movement", "copy"), ("movement", "view"), ("movement", "cat"),
        ("movement", "index_select"), ("movement", "transpose"),
    ]
    assert all(i.suite == "fp8" and i.mode == "eager" for i in items)


def test_plan_finds_the_opinfo_entries_that_list_fp8():
    items = fp8_plan([E5M2], mode="compile", grad=True, subjects=["opinfo"])
    assert {"eye", "torch._scaled_mm"} <= {i.variant for i in items}
    assert all(i.subject == "opinfo" and i.mode == "compile" for i in items)


@pytest.mark.parametrize("call", [
    lambda: fp8_plan(["float8_e3m4"], mode="eager"),
    lambda: fp8_plan(["fp8"], mode="eager", subjects=["matmul"]),
    lambda: fp8_plan(["fp8"], mode="lazy"),
])
def test_plan_rejects_bad_input_with_one_sentence(call):
    with pytest.raises(InputError, match=r"^unknown .*\.$"):
        call()


# -- a fault-free sim passes ----------------------------------------------------------


def _cpu_scaled_mm_refusal(dtype_name: str, variant: str) -> str | None:
    """This CPU's own refusal of `_scaled_mm` in the dtype and scaling, or None: on CPUs where torch
    takes the oneDNN path for per-tensor scales (AMX), it has no kernel for the fnuz formats, so
    the CPU reference cannot exist."""
    import torch

    dtype = getattr(torch, dtype_name)
    rowwise = variant == "rowwise"
    scale_a = torch.ones(16, 1) if rowwise else torch.tensor(1.0)
    scale_b = torch.ones(1, 16) if rowwise else torch.tensor(1.0)
    try:
        torch._scaled_mm(torch.zeros(16, 32).to(dtype), torch.zeros(16, 32).to(dtype).t(),
                         scale_a=scale_a, scale_b=scale_b, out_dtype=torch.float32)
    except RuntimeError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("item", fp8_plan(["fp8"], mode="eager", subjects=CORE_SUBJECTS), ids=lambda i: i.test_id)
def test_fault_free_sim_passes(item, ctx):
    result = fp8.run_item(item, ctx)
    refusal = _cpu_scaled_mm_refusal(item.dtype, item.variant) if item.subject == "scaled_mm" else None
    if refusal is not None:  # says nothing about the backend: REF_ERROR, with the CPU's own words
        assert result.status is Status.REF_ERROR and refusal.split()[0] in result.message, result.message
        return
    assert result.status is Status.PASS, (result.first_failure, result.message)
    assert result.samples == result.samples_passed > 0
    assert result.aten_ops and result.claimed is True


@pytest.mark.parametrize("variant", ["eye", "torch._scaled_mm"])
def test_fault_free_sim_passes_fp8_opinfo_entries(variant, ctx):
    result = fp8.run_item(WorkItem("fp8", "opinfo", variant, E4M3, "eager"), ctx)
    assert result.status is Status.PASS, (result.first_failure, result.message)
    assert result.samples_passed == result.samples > 0


def test_compile_mode_compiles_and_records_its_facts_on_fault_free_sim(ctx):
    for variant in ("to_float32", "from_bfloat16"):
        result = fp8.run_item(WorkItem("fp8", "cast", variant, E5M2, "compile"), ctx)
        assert result.status is Status.PASS, result.message
        # a graph really reached the backend (a dispatch mode would have made dynamo run eagerly)
        assert result.compile["graphs"] >= 1 and "aten._to_copy.default" in result.compile["graph_ops"]
        assert result.aten_ops == {"aten._to_copy.default": 1}


@pytest.mark.parametrize("profile_data, status", [
    ({"compile_unsupported_ops": ["aten._to_copy.default"]}, Status.UNSUPPORTED),
    ({"compile_faults": [{"op": "aten._to_copy.default", "kind": "nan"}]}, Status.MISMATCH),
])
def test_compile_only_faults_are_caught_in_compile_mode_and_not_in_eager(ctx, profile, profile_data, status):
    profile(profile_data)
    compiled = fp8.run_item(WorkItem("fp8", "cast", "to_float32", E5M2, "compile"), ctx)
    assert compiled.status is status and compiled.failing_op == "aten._to_copy.default", compiled.message
    if status is Status.UNSUPPORTED:
        assert compiled.compile["phase"] == "lower"
    assert fp8.run_item(WorkItem("fp8", "cast", "to_float32", E5M2, "eager"), ctx).status is Status.PASS


# -- faults are caught ----------------------------------------------------------------


def test_nan_fault_on_e5m2_conversions_fails_e5m2_items_only(ctx, profile):
    profile({"faults": [{"op": "aten._to_copy.default", "dtype": E5M2, "kind": "nan"}]})
    results = run_all(fp8_plan([E4M3, E5M2], mode="eager", subjects=CORE_SUBJECTS), ctx)
    for item, result in results.items():
        expected = Status.MISMATCH if item.dtype == E5M2 else Status.PASS
        assert result.status is expected, (item, result.message)
        if item.dtype == E5M2:
            assert result.failing_op == "aten._to_copy.default"
            assert "nan" in result.message


def test_offset_fault_that_shifts_rounding_names_the_first_differing_input(ctx, profile):
    # Adding 2**-10 to e4m3fn results flips every odd code just above 2**-9 to the even one
    # above it; the first grid value that rounds to such a code is the neighbour just above
    # the tie 2**-10 (0x3a800000), so that is the input the suite must name.
    profile(ROUNDING_SHIFT)
    result = fp8.run_item(WorkItem("fp8", "cast", "from_float32", E4M3, "eager"), ctx)
    assert result.status is Status.MISMATCH
    assert result.first_failure == "boundary grid: input 0x3a800001 (0.0009765626164153218)"
    assert "first: input 0x3a800001 (0.0009765626164153218): device 0x02 (0.00390625), CPU 0x01 (0.001953125)" in result.message
    assert result.failing_op == "aten._to_copy.default"


def test_transfer_fault_is_blamed_on_the_transfer_not_the_op(ctx, profile):
    profile(ROUNDING_SHIFT)
    result = fp8.run_item(WorkItem("fp8", "movement", "cat", E4M3, "eager"), ctx)
    assert result.status is Status.MISMATCH
    assert result.first_failure == "all 256 codes: transfer of input 0, element 1"
    assert "sent 0x01 (0.001953125), got back 0x02 (0.00390625)" in result.message


def test_scaled_mm_outside_the_error_bound_is_a_mismatch(ctx, profile):
    profile({"faults": [{"op": "aten._scaled_mm.default", "kind": "scale", "value": 1.02}]})
    result = fp8.run_item(WorkItem("fp8", "scaled_mm", "rowwise", E4M3, "eager"), ctx)
    assert result.status is Status.MISMATCH
    assert "outside the error bound" in result.message
    assert result.failing_op == "aten._scaled_mm.default"
    assert result.extra["bound_ratio"] > 1


def test_scaled_mm_that_raises_is_an_error_and_names_the_op(ctx, profile):
    profile({"faults": [{"op": "aten._scaled_mm.default", "kind": "raise", "value": "cublas status 7"}]})
    result = fp8.run_item(WorkItem("fp8", "scaled_mm", "per_tensor", E5M2, "eager"), ctx)
    assert result.status is Status.ERROR
    assert result.failing_op == "aten._scaled_mm.default"
    assert "cublas status 7" in result.message


def test_missing_scaled_mm_kernel_is_unsupported(ctx, profile):
    profile({"unsupported_ops": ["aten._scaled_mm.default"]})
    result = fp8.run_item(WorkItem("fp8", "scaled_mm", "per_tensor", E4M3, "eager"), ctx)
    assert result.status is Status.UNSUPPORTED
    assert fp8.run_item(WorkItem("fp8", "cast", "to_float32", E4M3, "eager"), ctx).status is Status.PASS


def test_fallback_with_right_results_is_fallback(ctx, profile):
    profile({"fallback_ops": ["aten._scaled_mm.default"]})
    with pytest.warns(UserWarning, match="fall back to run on the CPU"):
        result = fp8.run_item(WorkItem("fp8", "scaled_mm", "per_tensor", E4M3, "eager"), ctx)
    assert result.status is Status.FALLBACK
    assert result.fallback_ops == ["aten._scaled_mm.default"]


# -- a backend without FP8 is UNSUPPORTED, not ERROR -----------------------------------


def test_unsupported_fp8_dtype_in_profile_is_unsupported(ctx, profile):
    profile({"unsupported_dtypes": [E4M3]})
    items = fp8_plan([E4M3, E5M2], mode="eager", subjects=["cast", "movement"])
    for item, result in run_all(items, ctx).items():
        expected = Status.UNSUPPORTED if item.dtype == E4M3 else Status.PASS
        assert result.status is expected, (item, result.message)
        if item.dtype == E4M3:
            assert result.claimed is False and E4M3 in result.message


def test_probe_failure_is_unsupported_for_core_formats_and_skip_for_fnuz(ctx, profile):
    profile({"unsupported_ops": ["aten._to_copy.default"]})
    core = fp8.run_item(WorkItem("fp8", "cast", "to_float32", E4M3, "eager"), ctx)
    assert core.status is Status.UNSUPPORTED and core.check == "dtype-probe"
    fnuz = fp8.run_item(WorkItem("fp8", "cast", "to_float32", "float8_e4m3fnuz", "eager"), ctx)
    assert fnuz.status is Status.SKIP
    assert "float8_e4m3fnuz" in fnuz.message


# -- through the engine -----------------------------------------------------------------


def test_engine_runs_fp8_items_in_a_worker_and_stores_them(tmp_path):
    import json

    from conformance.engine.local import run_items
    from op_db.store import Store

    profile_file = tmp_path / "e5m2-nan.json"
    profile_file.write_text(json.dumps({"name": "e5m2-nan", "faults": [
        {"op": "aten._to_copy.default", "dtype": E5M2, "kind": "nan"}]}))
    config = RunConfig(backend="sim", device="sim", sim_profile=str(profile_file), timeout_s=60)
    items = [WorkItem("fp8", "cast", "to_float32", dtype, "eager") for dtype in (E4M3, E5M2)]
    store = Store.open(tmp_path / "fp8.db")
    run_id = store.create_run(backend="sim", device="sim")
    summary = run_items(items, config, store, run_id, progress=False)
    assert summary.counts == {"PASS": 1, "MISMATCH": 1}
    stored = {r.dtype: r for r in store.results(run_id, suite="fp8")}
    assert stored[E4M3].status is Status.PASS
    assert stored[E5M2].status is Status.MISMATCH
    assert stored[E5M2].first_failure == "all 256 codes: transfer of input 0, element 0"
