"""The numerics rule: each clause can pass and each can fail."""

import pytest
import torch

from conformance.numerics import compare, fp8_ulp_distance, tolerances


def test_identical_outputs_pass_by_allclose():
    x = torch.randn(64)
    result = compare(x, x.clone(), x.double())
    assert result.ok and result.rule == "allclose"
    assert result.max_abs_err == 0.0 and result.err_ratio == 1.0


def test_scaled_output_is_a_mismatch_naming_the_first_element():
    x = torch.randn(64)
    result = compare(x * 1.05, x, x.double())
    assert not result.ok
    assert "first at index 0" in result.reason and "float64 oracle" in result.reason
    assert result.max_rel_err == pytest.approx(0.05, rel=1e-3)


def test_oracle_rescues_a_device_that_is_closer_to_float64_than_cpu():
    exact = torch.randn(1000, dtype=torch.float64)
    ref = (exact + 1e-3 * torch.randn(1000, dtype=torch.float64)).float()  # a sloppy CPU
    dev = exact.float()  # a device that rounds correctly
    result = compare(dev, ref, exact)
    assert result.ok and result.rule == "oracle"
    assert result.err_ratio < 1


def test_oracle_rejects_a_device_much_worse_than_cpu():
    exact = torch.randn(1000, dtype=torch.float64)
    ref = exact.float()
    dev = (exact + 1e-2 * torch.randn(1000, dtype=torch.float64)).float()
    result = compare(dev, ref, exact)
    assert not result.ok and result.err_ratio > 2


def test_nan_positions_must_match():
    ref = torch.tensor([1.0, float("nan"), 3.0])
    assert compare(ref.clone(), ref).ok
    result = compare(torch.tensor([1.0, 2.0, float("nan")]), ref)
    assert not result.ok and "NaN positions differ" in result.reason


def test_inf_sign_must_match():
    result = compare(torch.tensor([float("-inf")]), torch.tensor([float("inf")]))
    assert not result.ok and "Inf positions differ" in result.reason


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.uint8])
def test_integer_outputs_are_exact(dtype):
    ref = torch.tensor([0, 1, 1], dtype=dtype)
    assert compare(ref.clone(), ref).ok
    result = compare(torch.tensor([0, 1, 0], dtype=dtype), ref)
    assert not result.ok and result.rule == "exact" and "index 2" in result.reason


def test_shape_and_dtype_are_checked():
    assert "shape" in compare(torch.zeros(2, 3), torch.zeros(3, 2)).reason
    assert "dtype float16 differs" in compare(torch.zeros(2, dtype=torch.float16), torch.zeros(2)).reason


def test_tuple_outputs_name_the_failing_leaf():
    ref = (torch.ones(2), torch.arange(3))
    result = compare((torch.ones(2), torch.tensor([0, 1, 3])), ref)
    assert not result.ok and result.leaf == 1 and result.reason.startswith("output 1:")


def test_overrides_loosen_but_never_tighten():
    assert tolerances(torch.float32, rtol=0.0, atol=0.0) == tolerances(torch.float32)
    assert tolerances(torch.bfloat16, atol=0.1)[1] == 0.1
    x = torch.ones(4)
    assert compare(x + 1e-3, x, atol=1e-2).ok


def test_complex_outputs_compare_real_and_imaginary_parts():
    ref = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)
    assert compare(ref.clone(), ref).ok
    assert not compare(ref.conj().resolve_conj(), ref).ok


def test_fp8_is_bit_exact_and_names_both_patterns():
    ref = torch.tensor([1.0, 2.0]).to(torch.float8_e4m3fn)
    dev = torch.tensor([1.0, 2.25]).to(torch.float8_e4m3fn)
    result = compare(dev, ref)
    assert not result.ok and "0x41" in result.reason and "0x40" in result.reason


def test_fp8_ulp_distance_counts_steps_across_zero():
    a = torch.tensor([1.0, 0.0, -0.0]).to(torch.float8_e5m2)
    b = torch.tensor([1.25, -0.0, 0.0]).to(torch.float8_e5m2)
    assert fp8_ulp_distance(a, b).tolist() == [1, 0, 0]


def test_bit_identical_result_is_judged_as_the_long_way_judges_it():
    """The shortcut for a device that returns the CPU's very bits (sim runs the CPU's kernels)
    must find exactly what measuring device and CPU separately finds: same verdict, errors,
    error ratio and ulp statistics, NaN and Inf included; a result one ulp off takes the long way."""
    import dataclasses

    from conformance.numerics import rule

    torch.manual_seed(0)
    hi = torch.randn(4096, dtype=torch.float64)
    hi[:3] = torch.tensor([float("nan"), float("inf"), 1e300], dtype=torch.float64)
    for dtype in (torch.float32, torch.bfloat16):
        ref = hi.to(dtype)
        for exact in (False, True):
            long_way = rule._compare_float(ref.double(), ref.double(), hi, dtype=dtype, rtol=None, atol=None,
                                           exact=exact, identical=False)
            long_way = rule._with_numerics(long_way, ref.double(), ref.double(), hi, dtype, judge=True)
            short = rule.compare_leaf(ref.clone(), ref, hi, exact=exact)
            assert dataclasses.asdict(short) == dataclasses.asdict(long_way)
        off = ref.clone()
        off.view(torch.int16 if dtype.itemsize == 2 else torch.int32)[100] += 1  # one ulp
        assert not rule._bit_identical(off, ref) and rule._bit_identical(ref.clone(), ref)
        assert rule.compare_leaf(off, ref, hi).max_abs_err > 0


def _full_merge(a, b):
    """Comparison.merge with its shortcut for an exact pass switched off."""
    from unittest import mock

    from conformance.numerics.comparison import Comparison

    with mock.patch.object(Comparison, "_is_exact_pass", lambda self: False):
        return a.merge(b)


@pytest.mark.parametrize("total", [
    dict(ok=True, rule="exact", max_abs_err=0.0, max_rel_err=0.0),
    dict(ok=True, rule="allclose", max_abs_err=1e-7, max_rel_err=2e-7, err_ratio=1.1),
    dict(ok=True, rule="exact"),  # no errors yet: the merge gives them
    dict(ok=True, rule="structure", max_abs_err=0.0, max_rel_err=0.0),  # weaker than exact: the merge names exact
    dict(ok=True, rule="oracle", reason="left over", max_abs_err=0.0, max_rel_err=0.0),  # a pass's reason is cleared
    dict(ok=False, rule="oracle", reason="too far", max_abs_err=0.5, max_rel_err=0.1, leaf=1, where="output 1"),
    dict(ok=True, rule="composite", max_abs_err=1e-6, max_rel_err=1e-6, note="less accurate; than the CPU"),
    dict(ok=True, rule="allclose", max_abs_err=1e-6, max_rel_err=1e-6, samples=3, passed=3),
])
def test_merging_an_exact_pass_gives_what_the_full_merge_gives(total):
    from conformance.numerics import Comparison

    a, exact = Comparison(**total), Comparison(True, "exact", "", 0.0, 0.0)
    assert a.merge(exact) == _full_merge(a, exact)
    assert exact.merge(a) == _full_merge(exact, a)
