"""The cases of the FP8 suite and how each is judged.

A `Case` is one sample: CPU input tensors, a function `fn(device, *tensors)` that
the runner calls once on the CPU (the reference) and once on the device, and a
judge. Conversions and data movement are judged bit for bit; `_scaled_mm` by the
error bound documented in conformance/fp8/suite.py; every judge is a comparison of
conformance/numerics/.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from conformance.fp8.inputs import all_codes, conversion_inputs
from conformance.numerics import Comparison, compare_bits, compare_fp8_steps, compare_scaled_mm

Judge = Callable[[Any, Any, list[torch.Tensor]], Comparison]


@dataclasses.dataclass
class Case:
    label: str
    inputs: list[torch.Tensor]
    fn: Callable[..., Any]  # fn(device: str, *inputs) -> tensor or tuple of tensors
    judge: Judge
    op: str | None  # the aten overload under test, named when the case mismatches
    check: str  # "bit-exact", "error-bound", "fp8-ulp", "numerics"


# -- judges: the comparisons of conformance/numerics/, bound to a case's inputs ----------


def judge_bits(*, nan_equal: bool, name_inputs: bool) -> Judge:
    """Bit-exact (numerics.compare_bits); with `name_inputs` a difference is named by the
    input element it was converted from."""
    return lambda dev, ref, inputs: compare_bits(dev, ref, nan_equal=nan_equal,
                                                 source=inputs[0] if name_inputs else None)


def judge_scaled_mm(dev: torch.Tensor, ref: torch.Tensor, inputs: list[torch.Tensor]) -> Comparison:
    return compare_scaled_mm(dev, ref, *inputs)


def judge_fp8_ulp(limit: int) -> Judge:
    """FP8 outputs of arithmetic within `limit` FP8 steps of the CPU's (numerics.compare_fp8_steps)."""
    return lambda dev, ref, inputs: compare_fp8_steps(dev, ref, limit)


# -- cases --------------------------------------------------------------------


def encode_cases(fp8: torch.dtype, source: torch.dtype) -> list[Case]:
    judge = judge_bits(nan_equal=True, name_inputs=True)
    to_fp8 = lambda device, x: x.to(fp8)
    return [Case(label, [values], to_fp8, judge, "aten._to_copy.default", "bit-exact")
            for label, values in conversion_inputs(fp8, source)]


def decode_cases(fp8: torch.dtype, wide: torch.dtype) -> list[Case]:
    judge = judge_bits(nan_equal=True, name_inputs=True)
    return [Case("all 256 codes", [all_codes(fp8)], lambda device, x: x.to(wide), judge,
                 "aten._to_copy.default", "bit-exact")]


def _copy(device: str, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    target = torch.empty_like(x)
    target.copy_(x)
    return target, x.clone(), x.to(device, copy=True)


def _view(device: str, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x.view(4, 64), x.view(torch.uint8), x.view(-1)[1::3], x[2:9, 3:]


def _cat(device: str, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.cat([x, y]), torch.cat([x, y[:, :5]], dim=1)


def _index_select(device: str, x: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x.index_select(0, index), x.index_select(1, index[:7])


def _transpose(device: str, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x.t().contiguous(), x.transpose(0, 1), x.reshape(4, 8, 8).permute(2, 0, 1).contiguous()


MOVEMENT = {
    "copy": (_copy, "aten.copy_.default"),
    "view": (_view, "aten.view.default"),
    "cat": (_cat, "aten.cat.default"),
    "index_select": (_index_select, "aten.index_select.default"),
    "transpose": (_transpose, "aten.transpose.int"),
}


def movement_cases(fp8: torch.dtype, variant: str) -> list[Case]:
    fn, op = MOVEMENT[variant]
    codes = all_codes(fp8).reshape(16, 16)
    extra = {
        "cat": [codes.flip(0)],
        "index_select": [torch.randperm(16, generator=torch.Generator().manual_seed(0))],
    }.get(variant, [])
    # Data movement must carry every code unchanged, NaN payloads included.
    return [Case("all 256 codes", [codes, *extra], fn, judge_bits(nan_equal=False, name_inputs=False), op, "bit-exact")]


SCALED_MM_SHAPE = (32, 64, 48)  # M, K, N: multiples of 16, as fp8 GEMM kernels require


def scaled_mm_cases(fp8: torch.dtype, variant: str, seed: int) -> list[Case]:
    m, k, n = SCALED_MM_SHAPE
    gen = torch.Generator().manual_seed(seed)
    finite = all_codes(fp8)[all_codes(fp8).float().isfinite()]

    def random_codes(rows: int, cols: int) -> torch.Tensor:
        # Uniform over finite codes: magnitudes from subnormal to the largest value.
        picks = torch.randint(len(finite), (rows, cols), generator=gen)
        return finite[picks]

    def gaussian(rows: int, cols: int) -> torch.Tensor:
        return (torch.randn(rows, cols, generator=gen) * 4).to(fp8)

    def scales(shape: tuple[int, ...]) -> torch.Tensor:
        return torch.rand(shape, generator=gen) * 1.5 + 0.5

    shape_a, shape_b = ((), ()) if variant == "per_tensor" else ((m, 1), (1, n))
    cases = []
    for label, make in (("gaussian values", gaussian), ("every finite code", random_codes)):
        inputs = [make(m, k), make(n, k), scales(shape_a), scales(shape_b)]
        cases.append(Case(label, inputs, _scaled_mm_bf16, judge_scaled_mm, "aten._scaled_mm.default", "error-bound"))
    return cases


def _scaled_mm_bf16(device: str, a: torch.Tensor, b_rows: torch.Tensor, scale_a: torch.Tensor,
                    scale_b: torch.Tensor) -> torch.Tensor:
    # The second operand goes in column-major, as cuBLASLt-style kernels want it.
    return torch._scaled_mm(a, b_rows.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)
