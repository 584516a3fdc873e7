"""The OpInfo suite, item by item, in this process on the sim device (profiles inject faults)."""

from pathlib import Path

import pytest

import conformance.sim as sim
from conformance.engine.config import RunConfig
from conformance.engine.worker import init_worker, run_one
from conformance.planning import OpsOptions
from op_db.records import Status, WorkItem

PROFILES = Path(__file__).parent / "profiles"

# A cross-section of op families: elementwise, reductions, linear algebra, nn, shape,
# indexing, sorting, random and undefined-output ops.
REPRESENTATIVE_OPS = [
    "abs", "add", "sub", "mul", "div.no_rounding_mode", "exp", "log", "sin", "cos", "tanh",
    "sigmoid", "sqrt", "rsqrt", "neg", "pow", "clamp", "maximum", "minimum", "where", "sum",
    "mean", "amax", "argmax", "cumsum", "matmul", "mm", "bmm", "addmm", "nn.functional.relu",
    "nn.functional.gelu", "nn.functional.silu", "softmax", "log_softmax", "nn.functional.layer_norm",
    "nn.functional.linear", "nn.functional.conv2d", "nn.functional.embedding", "cat", "stack",
    "reshape", "transpose", "permute", "index_select", "gather", "topk", "sort", "masked_fill",
    "tril", "flip", "nn.functional.dropout", "bernoulli", "normal", "empty", "empty_like",
    # Harness corner cases: an index tensor that must stay on the CPU, a torch.Size output,
    # complex32 (no torch.equal kernel).
    "tensor_split", "broadcast_shapes", "chalf",
    # A view whose op reads storage outside the view: the base must travel with it.
    "as_strided.partial_views",
]


@pytest.fixture(scope="module")
def sim_ctx():
    ctx = init_worker(RunConfig(backend="sim", device="sim", suite_options=OpsOptions(max_samples=3)))
    yield ctx
    sim.set_profile(None)


@pytest.fixture
def profile():
    """Activate a profile from tests/conformance/profiles by name for one test."""
    def activate(name):
        sim.set_profile(sim.load_profile(PROFILES / f"{name}.json"))
    yield activate
    sim.set_profile(None)


def run(ctx, subject, dtype="float32", variant="forward"):
    return run_one(WorkItem("opinfo", subject, variant, dtype, "eager"), ctx)


def test_scale_fault_in_bf16_mismatches_only_bf16(sim_ctx, profile):
    profile("scale_mul_bf16")
    bf16 = run(sim_ctx, "mul", "bfloat16")
    fp32 = run(sim_ctx, "mul", "float32")
    assert bf16.status is Status.MISMATCH
    assert bf16.failing_op == "aten.mul.Tensor"
    assert bf16.first_failure.startswith("sample ") and "bf16[" in bf16.first_failure
    assert bf16.samples_passed < bf16.samples
    assert fp32.status is Status.PASS and fp32.samples == fp32.samples_passed > 0
    assert fp32.aten_ops.get("aten.mul.Tensor", 0) > 0


def test_scale_fault_shows_in_gradients(sim_ctx, profile):
    profile("scale_mul_bf16")
    assert run(sim_ctx, "mul", "bfloat16", "backward").status is Status.MISMATCH
    assert run(sim_ctx, "mul", "float32", "backward").status is Status.PASS


def test_nan_fault_is_a_mismatch(sim_ctx, profile):
    profile("nan_exp")
    result = run(sim_ctx, "exp")
    assert result.status is Status.MISMATCH
    assert "NaN" in result.message
    assert result.check == "numerics"


def test_unsupported_op_names_the_failing_op(sim_ctx, profile):
    profile("unsupported_sort")
    result = run(sim_ctx, "sort")
    assert result.status is Status.UNSUPPORTED
    assert result.failing_op.startswith("aten.sort.")
    assert "Could not run" in result.message


def test_cpu_fallback_gives_fallback(sim_ctx, profile):
    profile("fallback_median")
    result = run(sim_ctx, "median")
    assert result.status is Status.FALLBACK
    assert any(op.startswith("aten.median.") for op in result.fallback_ops)
    assert result.samples == result.samples_passed > 0


def test_fault_free_profile_passes_representative_ops(sim_ctx, profile):
    profile("fault_free")
    assert len(REPRESENTATIVE_OPS) >= 40
    results = [run(sim_ctx, name) for name in REPRESENTATIVE_OPS]
    bad = {r.subject: (r.status.value, r.message) for r in results if r.status in (Status.MISMATCH, Status.ERROR)}
    assert bad == {}
    assert all(r.status is Status.PASS for r in results), [(r.subject, r.status) for r in results if r.status is not Status.PASS]


def test_undefined_and_random_outputs_name_their_check(sim_ctx):
    assert run(sim_ctx, "empty").check == "shape-dtype-device"
    assert run(sim_ctx, "mul").check == "numerics"


@pytest.mark.parametrize("offset, status", [(0.01, Status.PASS), (1000.0, Status.MISMATCH)])
def test_random_op_values_off_the_cpu_stream_are_range_checked(sim_ctx, offset, status):
    # A real device draws other random numbers than the CPU; a small offset stands in for that,
    # a huge one for a broken generator.
    sim.set_profile(sim.load_profile({"name": "shifted-normal", "faults": [
        {"op": "aten.normal.*", "kind": "offset", "value": offset}]}))
    try:
        result = run(sim_ctx, "normal")
    finally:
        sim.set_profile(None)
    assert result.status is status
    assert result.check == "random-range"


def test_claims_follow_cuda_for_accelerators(sim_ctx):
    result = run(sim_ctx, "mul", "bfloat16")
    assert result.claimed is True


def test_samples_are_reproducible(sim_ctx):
    first, second = run(sim_ctx, "add"), run(sim_ctx, "add")
    assert (first.samples, first.max_abs_err, first.aten_ops) == (second.samples, second.max_abs_err, second.aten_ops)


def test_unknown_op_is_skipped(sim_ctx):
    result = run(sim_ctx, "no.such.op")
    assert result.status is Status.SKIP


def test_cuda_only_opinfos_are_skipped_not_blamed_on_the_cpu(sim_ctx):
    result = run(sim_ctx, "jiterator_unary")
    assert result.status is Status.SKIP and "onlyCUDA" in result.message


def test_meta_device_compares_metadata_only():
    ctx = init_worker(RunConfig(backend="meta", device="meta", suite_options=OpsOptions(max_samples=2)))
    result = run_one(WorkItem("opinfo", "add", "forward", "float32", "eager"), ctx)
    assert result.status is Status.PASS
    assert result.check == "shape-dtype-device"
    nonzero = run_one(WorkItem("opinfo", "nonzero", "forward", "float32", "eager"), ctx)
    assert nonzero.status is Status.UNSUPPORTED


@pytest.mark.slow
def test_compile_mode_on_cpu_with_inductor():
    ctx = init_worker(RunConfig(backend="cpu", device="cpu", suite_options=OpsOptions(max_samples=1)))
    for subject in ("add", "abs"):
        result = run_one(WorkItem("opinfo", subject, "forward", "float32", "compile"), ctx)
        assert result.status is Status.PASS, result.message
        assert result.extra["compile_backend"] == "inductor"


@pytest.mark.parametrize("exc, status", [
    (NotImplementedError("anything"), Status.UNSUPPORTED),
    (RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'"), Status.UNSUPPORTED),
    (RuntimeError("Could not run 'aten::sort' with arguments from the 'sim' backend."), Status.UNSUPPORTED),
    (TypeError("dtype float64 is not supported on the neuron backend"), Status.UNSUPPORTED),
    (RuntimeError("shape mismatch in kernel"), Status.ERROR),
    (ValueError("bad value"), Status.ERROR),
])
def test_classify_exception(exc, status):
    from conformance.outcome import classify_exception

    assert classify_exception(exc) is status


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_partial_view_gradients_keep_their_place_in_the_base(sim_ctx, dtype):
    # as_strided reads storage outside its input view; its backward reads that geometry too.
    result = run(sim_ctx, "as_strided.partial_views", dtype, "backward")
    assert result.status is Status.PASS, result.message


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_gradient_known_to_be_zero_passes(sim_ctx, dtype):
    # sgn's gradient of a real tensor is a ZeroTensor; it crashed the worker (CRASH) on sim.
    result = run(sim_ctx, "sgn", dtype, "backward")
    assert result.status is Status.PASS, result.message


def test_random_ops_are_seeded_alike_on_cpu_and_device_without_torch_manual_seed(sim_ctx):
    # OpInfo's wrapper_set_seed seeds the CPU and the device directly (conformance/opinfo/run.py),
    # not through torch.manual_seed, which queued a lazy CUDA seeding with a stack each call.
    import torch.cuda

    run(sim_ctx, "abs")  # the suite is prepared
    queued = len(torch.cuda._queued_calls)
    result = run(sim_ctx, "nn.functional.dropout")
    # The same draws on both sides: judged value by value, not by the random-range check.
    assert result.status is Status.PASS and result.check == "numerics" and result.samples > 0
    assert len(torch.cuda._queued_calls) == queued
