"""ulp statistics, the bias rule and rounding classification (conformance/numerics/ulp.py, rule 5).

The library functions are checked against hand-computed values; the rule is checked end to
end on the sim device: injected faults must be caught with the exact status, fault-free ops
must pass and carry their statistics.
"""

import math

import pytest
import torch

import conformance.sim as sim
from conformance.engine.config import RunConfig
from conformance.engine.worker import init_worker, run_one
from conformance.numerics import compare, ulp
from conformance.planning import OpsOptions
from op_db.errors import InputError
from op_db.records import Status, WorkItem, parse_rounding

FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]


# -- the grid -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, value, expected", [
    (torch.bfloat16, 1.0, 2.0 ** -7), (torch.bfloat16, 3.0, 2.0 ** -6), (torch.float16, 1.0, 2.0 ** -10),
    (torch.float32, 1.0, 2.0 ** -23), (torch.float16, 1e-6, 2.0 ** -24),  # float16 subnormal
    (torch.float8_e4m3fn, 1.0, 0.125), (torch.float8_e4m3fn, 2.0 ** -8, 2.0 ** -9),  # e4m3fn subnormal
    (torch.float8_e5m2, 1.0, 0.25), (torch.bfloat16, 0.0, 2.0 ** -133),
])
def test_ulp_matches_the_format(dtype, value, expected):
    assert float(ulp.ulp(torch.tensor([value], dtype=torch.float64), dtype)) == expected


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, *FP8])
def test_nearest_even_agrees_with_torch_where_torch_rounds_once(dtype):
    # float32 -> narrow casts round once, correctly: the reference for our float64 rounding.
    values = torch.randn(5000, generator=torch.Generator().manual_seed(0), dtype=torch.float32) * 4
    values = values.clamp(-torch.finfo(dtype).max, torch.finfo(dtype).max)
    ours = ulp.round_nearest_even(values.double(), dtype)
    assert torch.equal(ours, values.to(dtype).double())
    assert torch.equal(ours.to(dtype).double(), ours)  # representable


def test_nearest_even_rounds_once_where_a_float32_detour_would_not():
    # 1 + 2^-8 + 2^-30: just above a bfloat16 midpoint; via float32 it becomes the midpoint (tie -> 1).
    x = torch.tensor([1 + 2.0 ** -8 + 2.0 ** -30], dtype=torch.float64)
    assert float(x.to(torch.bfloat16)) == 1.0
    assert float(ulp.round_nearest_even(x, torch.bfloat16)) == 1 + 2.0 ** -7


def test_toward_zero_and_double_rounding_by_hand():
    x = torch.tensor([1 + 0.9 * 2.0 ** -7, -(1 + 0.9 * 2.0 ** -7)], dtype=torch.float64)
    assert ulp.round_toward_zero(x, torch.bfloat16).tolist() == [1.0, -1.0]
    assert ulp.round_nearest_even(x, torch.bfloat16).tolist() == [1 + 2.0 ** -7, -(1 + 2.0 ** -7)]
    # Just above the bfloat16 midpoint 1 + 2^-8, closer to it than half a float16 ulp: float16 rounds
    # it onto the midpoint, and the tie then goes to the even 1.0; one rounding gives 1 + 2^-7.
    y = torch.tensor([1 + 2.0 ** -8 + 2.0 ** -13], dtype=torch.float64)
    assert float(ulp.round_double(y, torch.bfloat16)) == 1.0
    assert float(ulp.round_nearest_even(y, torch.bfloat16)) == 1 + 2.0 ** -7


# -- statistics and classification ----------------------------------------------------------


@pytest.fixture
def exact_products():
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(4000, generator=gen).bfloat16().double()
    b = torch.randn(4000, generator=gen).bfloat16().double()
    return a * b + a  # not representable in bfloat16 for most elements


def stats_of(values, hi, dtype=torch.bfloat16):
    return ulp.leaf_stats([values], hi, dtype)[0]


@pytest.mark.parametrize("rounding, expected", [
    (lambda hi: ulp.round_nearest_even(hi, torch.bfloat16), ulp.NEAREST_EVEN),
    (lambda hi: ulp.round_toward_zero(hi, torch.bfloat16), ulp.TOWARD_ZERO),
    (lambda hi: ulp.round_double(hi, torch.bfloat16), ulp.DOUBLE_ROUNDING),
    (lambda hi: ulp.round_stochastic(hi, torch.bfloat16, torch.Generator().manual_seed(1)), ulp.STOCHASTIC),
    (lambda hi: ulp.round_nearest_even(hi * 1.01, torch.bfloat16), ulp.UNKNOWN),
])
def test_rounding_is_classified(exact_products, rounding, expected):
    assert stats_of(rounding(exact_products), exact_products).rounding() == expected


def test_statistics_of_correct_and_truncated_rounding(exact_products):
    hi = exact_products
    correct = stats_of(ulp.round_nearest_even(hi, torch.bfloat16), hi)
    assert correct.share_correct == 1.0 and correct.max_abs <= 0.5
    assert abs(correct.bias) < 4 * correct.stderr(correct.bias)
    truncated = stats_of(ulp.round_toward_zero(hi, torch.bfloat16), hi)
    # Toward zero: magnitudes lean down by about half an ulp, signed errors cancel over both signs.
    assert -0.55 < truncated.magnitude_bias < -0.4
    assert abs(truncated.bias) < 0.1
    assert truncated.max_abs < 1.0


def test_statistics_merge_by_addition(exact_products):
    hi = exact_products
    values = ulp.round_toward_zero(hi, torch.bfloat16)
    whole = stats_of(values, hi)
    halves = stats_of(values[:1000], hi[:1000]).merge(stats_of(values[1000:], hi[1000:]))
    assert halves.n == whole.n and halves.correct == whole.correct and halves.rounding() == whole.rounding()
    assert math.isclose(halves.magnitude_bias, whole.magnitude_bias, rel_tol=1e-12)


def test_non_finite_and_out_of_range_elements_are_left_out():
    hi = torch.tensor([1.0, math.inf, math.nan, 1e6, 2.0], dtype=torch.float64)
    dev = torch.tensor([1.0, math.inf, math.nan, math.inf, 2.0], dtype=torch.float64)
    assert stats_of(dev, hi, torch.float16).n == 2  # 1e6 is beyond float16's range


# -- the rule inside compare() ---------------------------------------------------------------


def test_compare_turns_a_lean_into_a_mismatch_with_the_words(exact_products):
    hi = exact_products
    ref = ulp.round_nearest_even(hi, torch.bfloat16).bfloat16()
    dev = ulp.round_nearest_even(hi * 1.005, torch.bfloat16).bfloat16()
    assert compare(dev, ref).ok  # within bfloat16's tolerance: the old rule passes it
    result = compare(dev, ref, hi)
    assert not result.ok and result.rule == "bias"
    assert result.reason.startswith("systematic bias +") and "ulp away from zero over 4,000 elements (CPU " in result.reason
    assert result.numerics.to_dict()["cpu"]["rounding"] == ulp.NEAREST_EVEN


def test_compare_names_truncation(exact_products):
    hi = exact_products
    ref = ulp.round_nearest_even(hi, torch.bfloat16).bfloat16()
    dev = ulp.round_toward_zero(hi, torch.bfloat16).bfloat16()
    result = compare(dev, ref, hi)
    assert not result.ok
    assert "toward zero" in result.reason and result.reason.endswith("rounding looks like round-toward-zero")


def test_stochastic_rounding_is_not_a_mismatch(exact_products):
    hi = exact_products
    ref = ulp.round_nearest_even(hi, torch.bfloat16).bfloat16()
    dev = ulp.round_stochastic(hi, torch.bfloat16, torch.Generator().manual_seed(5)).bfloat16()
    result = compare(dev, ref, hi)
    assert result.ok and result.numerics.to_dict()["rounding"] == ulp.STOCHASTIC


def test_a_lean_the_cpu_shares_is_not_the_devices_fault(exact_products):
    hi = exact_products
    both = ulp.round_toward_zero(hi, torch.bfloat16).bfloat16()
    assert compare(both.clone(), both, hi).ok


def test_reordered_accumulation_does_not_trip_the_rule():
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(256, 512, generator=gen)
    hi = x.double().sum(dim=1)
    forward = x.sum(dim=1)
    backward = x.flip(1).reshape(256, 8, 64).sum(dim=2).sum(dim=1)  # another order, pairwise
    assert not torch.equal(forward, backward)
    result = compare(backward, forward, hi)
    assert result.ok, result.reason
    assert result.numerics.to_dict()["elements"] == 256


def test_fused_multiply_add_does_not_trip_the_rule():
    gen = torch.Generator().manual_seed(12)
    a, b, c = (torch.randn(4096, generator=gen) for _ in range(3))
    hi = a.double() * b.double() + c.double()
    unfused = a * b + c
    fused = hi.float()  # one rounding, as an FMA does
    result = compare(fused, unfused, hi)
    assert result.ok, result.reason


def test_expected_rounding_is_parsed_or_refused_naming_the_classes():
    assert parse_rounding("Toward_Zero") == "toward-zero"
    with pytest.raises(InputError, match="known classes: nearest-even, toward-zero, stochastic, double-rounding"):
        parse_rounding("sideways")


# -- end to end on sim --------------------------------------------------------------------


@pytest.fixture(scope="module")
def sim_ctx():
    ctx = init_worker(RunConfig(backend="sim", device="sim"))
    yield ctx
    sim.set_profile(None)


def run(ctx, subject, dtype, faults=(), mode="eager"):
    sim.set_profile(sim.load_profile({"name": "test", "faults": list(faults)}))
    try:
        return run_one(WorkItem("opinfo", subject, "forward", dtype, mode), ctx)
    finally:
        sim.set_profile(None)


def test_bf16_mul_scaled_by_half_a_percent_is_a_bias_mismatch(sim_ctx):
    result = run(sim_ctx, "mul", "bfloat16", [{"op": "aten.mul.Tensor", "kind": "scale", "value": 1.005}])
    assert result.status is Status.MISMATCH
    assert result.message.startswith("systematic bias +") and "ulp away from zero over" in result.message
    assert result.numerics["magnitude_bias"] > 0.5 and result.numerics["cpu"]["rounding"] == ulp.NEAREST_EVEN


def test_scale_as_small_as_0_2_percent_is_caught_in_bf16(sim_ctx):
    result = run(sim_ctx, "mul", "bfloat16", [{"op": "aten.mul.Tensor", "kind": "scale", "value": 1.002}])
    assert result.status is Status.MISMATCH and "systematic bias" in result.message


@pytest.mark.parametrize("subject, op", [("add", "aten.add.Tensor"), ("mul", "aten.mul.Tensor")])
def test_truncation_is_a_mismatch_classified_toward_zero(sim_ctx, subject, op):
    result = run(sim_ctx, subject, "bfloat16", [{"op": op, "kind": "truncate"}])
    assert result.status is Status.MISMATCH
    assert "round-toward-zero" in result.message
    assert result.numerics["rounding"] == ulp.TOWARD_ZERO


def test_stochastic_rounding_passes_and_is_classified(sim_ctx):
    result = run(sim_ctx, "add", "bfloat16", [{"op": "aten.add.Tensor", "kind": "stochastic", "value": 7}])
    assert result.status is Status.PASS
    assert result.numerics["rounding"] == ulp.STOCHASTIC
    assert result.numerics["max_ulp"] < 1.0 < result.numerics["max_ulp"] * 2


def test_stochastic_draws_are_seeded(sim_ctx):
    fault = [{"op": "aten.add.Tensor", "kind": "stochastic", "value": 3}]
    assert run(sim_ctx, "add", "bfloat16", fault).numerics == run(sim_ctx, "add", "bfloat16", fault).numerics


def test_double_rounding_is_a_mismatch_classified(sim_ctx):
    result = run(sim_ctx, "mul", "bfloat16", [{"op": "aten.mul.Tensor", "kind": "double_round"}])
    assert result.status is Status.MISMATCH and "double rounding" in result.message
    assert result.numerics["rounding"] == ulp.DOUBLE_ROUNDING


@pytest.mark.parametrize("expect, status", [("toward-zero", Status.PASS), ("nearest-even", Status.MISMATCH)])
def test_expected_rounding_is_asserted(expect, status):
    ctx = init_worker(RunConfig(backend="sim", device="sim", suite_options=OpsOptions(expect_rounding=expect)))
    result = run(ctx, "mul", "bfloat16", [{"op": "aten.mul.Tensor", "kind": "truncate"}])
    assert result.status is status
    if status is Status.MISMATCH:
        assert result.message.startswith("rounding looks like round-toward-zero, not the expected nearest-even")


# Element-wise, reductions, matmul, softmax, norms, attention.
COMMON_OPS = [
    "add", "sub", "mul", "div.no_rounding_mode", "exp", "log", "sin", "tanh", "sigmoid", "sqrt", "rsqrt",
    "pow", "nn.functional.gelu", "nn.functional.silu", "sum", "mean", "prod", "var", "cumsum", "amax",
    "matmul", "mm", "bmm", "addmm", "nn.functional.linear", "softmax", "log_softmax",
    "nn.functional.layer_norm", "nn.functional.rms_norm", "nn.functional.group_norm",
    "nn.functional.scaled_dot_product_attention",
]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_fault_free_sweep_has_no_mismatch_and_every_pass_carries_max_ulp(sim_ctx, dtype):
    results = [run(sim_ctx, op, dtype) for op in COMMON_OPS]
    wrong = [(r.subject, r.status, r.message) for r in results if r.status not in (Status.PASS, Status.SKIP)]
    assert wrong == []
    passed = [r for r in results if r.status is Status.PASS]
    assert len(passed) >= len(COMMON_OPS) - 2
    assert all(r.numerics.get("max_ulp") is not None for r in passed), [r.subject for r in passed if not r.numerics]


def test_fp8_results_carry_statistics_and_a_2d_difference_is_described():
    gen = torch.Generator().manual_seed(4)
    hi = torch.randn(16, 64, generator=gen, dtype=torch.float64)
    ref = ulp.round_nearest_even(hi, torch.float8_e4m3fn).to(torch.float8_e4m3fn)
    dev = ulp.round_toward_zero(hi, torch.float8_e4m3fn).to(torch.float8_e4m3fn)
    result = compare(dev, ref, hi)
    assert not result.ok and "values differ; first: element " in result.reason
    assert result.numerics.to_dict()["rounding"] == ulp.TOWARD_ZERO
    assert compare(ref.clone(), ref, hi).numerics.to_dict()["share_correct"] == 1.0


# -- the sim faults that inject rounding errors ---------------------------------------------


@pytest.mark.parametrize("fault, words", [
    ({"op": "aten.add.Tensor", "kind": "truncate", "value": 1}, ["faults entry 0", "takes no 'value'"]),
    ({"op": "aten.add.Tensor", "kind": "double_round", "value": "x"}, ["faults entry 0", "takes no 'value'"]),
    ({"op": "aten.add.Tensor", "kind": "stochastic", "value": -1}, ["non-negative integer seed", "-1"]),
    ({"op": "aten.add.Tensor", "kind": "stochastic", "value": 0.5}, ["non-negative integer seed"]),
    ({"op": "aten.add.Tensor", "kind": "scale", "value": 0}, ["non-zero"]),
    ({"op": "aten.add.Tensor", "kind": "scale", "value": float("inf")}, ["finite"]),
])
def test_invalid_rounding_faults_are_refused_in_one_sentence(sim_device, fault, words):
    with pytest.raises(InputError) as info:
        sim_device.load_profile({"faults": [fault]})
    assert all(w in str(info.value) for w in words) and "\n" not in str(info.value)


ULP_AT_1 = 2.0 ** -7  # bfloat16's spacing in [1, 2)


@pytest.mark.parametrize("kind, b, expected", [
    # 1 + 1.5 ulp: nearest-even gives 1 + 2 ulp, toward zero 1 + 1 ulp.
    ("truncate", 1.5 * ULP_AT_1, 1 + ULP_AT_1),
    # 1 + 2^-8 + 2^-13: just above the midpoint 1 + 2^-8; float16 rounds it onto the midpoint,
    # whose tie then goes to the even 1.0 (nearest-even of the exact sum is 1 + 1 ulp).
    ("double_round", 2.0 ** -8 + 2.0 ** -13, 1.0),
    # 1 + 1.375 ulp rounds to 1 + 1 ulp, which scaled by 1.002 still rounds there; scaling the
    # float32 sum instead gives 1 + 1.63 ulp, so 1 + 2 ulp: the fault acts below the rounding.
    ("scale", 1.375 * ULP_AT_1, 1 + 2 * ULP_AT_1),
])
def test_rounding_faults_round_the_float32_result(use_profile, kind, b, expected):
    use_profile({"faults": [{"op": "aten.add.Tensor", "kind": kind, **({"value": 1.002} if kind == "scale" else {})}]})
    a = torch.ones(1, dtype=torch.bfloat16, device="sim")
    addend = torch.tensor([b], dtype=torch.bfloat16)
    assert float(addend) == b  # representable: the exact sum is what float32 computes
    out = (a + addend.to("sim")).cpu()
    assert out.dtype == torch.bfloat16 and float(out) == expected


def test_rounding_faults_leave_in_place_inputs_and_float64_alone(use_profile):
    use_profile({"faults": [{"op": "aten.*", "kind": "truncate"}]})
    x = torch.full((4,), 1.0, dtype=torch.bfloat16, device="sim")
    x.add_(torch.full((4,), 0.99 * 2.0 ** -7, dtype=torch.float32).bfloat16().to("sim"))
    # 1 + 0.99 ulp: nearest is 1 + 2^-7, toward zero is 1.0, computed from the inputs before the write.
    assert torch.equal(x.cpu(), torch.ones(4, dtype=torch.bfloat16))
    d = torch.full((2,), 1.0, dtype=torch.float64, device="sim") / 3
    assert torch.equal(d.cpu(), torch.full((2,), 1.0, dtype=torch.float64) / 3)


def test_rounding_faults_are_refused_for_collectives(sim_device):
    # A collective has no op to recompute one precision up: the kinds are ops' only.
    with pytest.raises(InputError, match="unknown fault kind 'truncate'"):
        sim_device.load_profile({"collective_faults": [{"op": "all_reduce", "kind": "truncate"}]})
