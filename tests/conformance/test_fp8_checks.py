"""The FP8 suite's inputs and judges, on the CPU alone."""

from __future__ import annotations

import pytest
import torch

from conformance.fp8.cases import judge_bits, judge_fp8_ulp, judge_scaled_mm, scaled_mm_cases
from conformance.fp8.inputs import all_codes, boundary_grid, dense_float32_grid, every_value
from conformance.numerics import bits, describe_value

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


@pytest.mark.parametrize("fp8", [E4M3, E5M2])
@pytest.mark.parametrize("source", [torch.float32, torch.bfloat16, torch.float16])
def test_boundary_grid_holds_every_value_tie_and_neighbour(fp8, source):
    grid = set(boundary_grid(fp8, source).to(torch.float64).tolist())
    values = sorted({v for v in all_codes(fp8).to(torch.float64).tolist() if v == v and abs(v) != float("inf")})
    positive = [v for v in values if v >= 0]
    ties = [(a + b) / 2 for a, b in zip(positive, positive[1:])]
    assert set(values) <= grid
    for tie in ties + [positive[-1] + (positive[-1] - positive[-2]) / 2]:  # incl. the overflow edge
        pattern = bits(torch.tensor([tie], dtype=source))
        below, above = (pattern - 1).view(source), (pattern + 1).view(source)
        assert {tie, -tie, float(below), float(above), -float(above)} <= grid
    assert float("inf") in grid and float("-inf") in grid
    assert any(v != v for v in grid)  # NaN
    signed_zero = boundary_grid(fp8, source)[boundary_grid(fp8, source) == 0]
    assert {str(float(z)) for z in signed_zero} == {"0.0", "-0.0"}


def test_dense_grids_cover_all_16_bit_values_and_float32_rounding_bits():
    assert torch.unique(every_value(torch.bfloat16).view(torch.int16)).numel() == 1 << 16
    dense = dense_float32_grid().view(torch.int32)
    assert dense.numel() == 5 << 16
    assert int(dense.eq(0x3F808000).sum()) == 1  # 1.0 + a set bit 15: a sticky-bit pattern


def test_describe_value_names_bits_and_value():
    assert describe_value(torch.tensor([1.0, 448.0]), 1) == "0x43e00000 (448.0)"
    assert describe_value(all_codes(E4M3), 0x7E) == "0x7e (448.0)"
    assert describe_value(torch.tensor([-0.0], dtype=torch.bfloat16), 0) == "0x8000 (-0.0)"


def test_bits_judge_treats_any_nan_alike_only_when_asked():
    codes = all_codes(E5M2)
    other_nan = codes.clone()
    other_nan.view(torch.uint8)[0x7D] = 0x7F  # a different NaN payload
    assert judge_bits(nan_equal=True, name_inputs=True)(other_nan, codes, [codes]).ok
    strict = judge_bits(nan_equal=False, name_inputs=True)(other_nan, codes, [codes])
    assert not strict.ok
    assert strict.reason == "1/256 values differ; first: input 0x7d (nan): device 0x7f (nan), CPU 0x7d (nan)"


def test_fp8_ulp_judge_allows_one_step_not_two():
    ref = torch.tensor([1.0, 2.0, -4.0]).to(E4M3)
    one_step = ref.view(torch.uint8).clone()
    one_step[1] += 1
    two_steps = ref.view(torch.uint8).clone()
    two_steps[2] += 2
    judge = judge_fp8_ulp(1)
    assert judge(one_step.view(E4M3), ref, []).ok
    verdict = judge(two_steps.view(E4M3), ref, [])
    assert not verdict.ok and verdict.where == "element 2"


@pytest.mark.parametrize("variant", ["per_tensor", "rowwise"])
def test_error_bound_holds_for_cpu_and_catches_a_two_ulp_bias(variant):
    for case in scaled_mm_cases(E4M3, variant, seed=0):
        cpu = case.fn("cpu", *case.inputs)
        verdict = judge_scaled_mm(cpu, cpu, case.inputs)
        assert verdict.ok and 0 < verdict.bound_ratio <= 1
        biased = (cpu.float() * (1 + 2 * torch.finfo(torch.bfloat16).eps)).to(torch.bfloat16)
        assert not judge_scaled_mm(biased, cpu, case.inputs).ok
