"""The cases of the FP8 suite and how each is judged.

A `Case` is one sample: CPU input tensors, a function `fn(device, *tensors)` that
the runner calls once on the CPU (the reference) and once on the device, and a
judge. Conversions and data movement are judged bit for bit; `_scaled_mm` by the
error bound documented in conformance/fp8.py (`scaled_mm_bound`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.fp8.inputs import all_codes, bits, conversion_inputs, describe_value
from conformance.numerics import fp8_ulp_distance

FP32_UNIT_ROUNDOFF = 2.0 ** -24


@dataclasses.dataclass
class Verdict:
    """How one case went: `where` names the first failing input, `detail` says what differed."""

    ok: bool
    where: str = ""
    detail: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    err_ratio: float | None = None
    bound_ratio: float | None = None


Judge = Callable[[Any, Any, list[torch.Tensor]], Verdict]


@dataclasses.dataclass
class Case:
    label: str
    inputs: list[torch.Tensor]
    fn: Callable[..., Any]  # fn(device: str, *inputs) -> tensor or tuple of tensors
    judge: Judge
    op: str | None  # the aten overload under test, named when the case mismatches
    check: str  # "bit-exact", "error-bound", "fp8-ulp", "numerics"


# -- judges -------------------------------------------------------------------


def first_bit_difference(dev: torch.Tensor, ref: torch.Tensor) -> int | None:
    """Flat index of the first element whose bit pattern differs (NaN payloads count), or None."""
    differ = bits(dev.contiguous().reshape(-1)) != bits(ref.contiguous().reshape(-1))
    return int(differ.nonzero()[0, 0]) if bool(differ.any()) else None


def judge_bits(*, nan_equal: bool, name_inputs: bool) -> Judge:
    """Bit-exact: every output bit pattern equals the CPU's. With `nan_equal`, any NaN
    matches any NaN (IEEE 754 leaves sign and payload of a converted NaN open).
    With `name_inputs`, a difference is reported by the input element it came from."""

    def judge(dev: Any, ref: Any, inputs: list[torch.Tensor]) -> Verdict:
        dev_leaves, ref_leaves = pytree.tree_leaves(dev), pytree.tree_leaves(ref)
        if len(dev_leaves) != len(ref_leaves):
            return Verdict(False, "output structure", f"{len(dev_leaves)} outputs, CPU gave {len(ref_leaves)}")
        worst = Verdict(True)
        for number, (d, r) in enumerate(zip(dev_leaves, ref_leaves)):
            verdict = _bits_leaf(d, r, inputs[0] if name_inputs else None, nan_equal)
            if len(ref_leaves) > 1 and not verdict.ok:
                verdict.where = f"output {number}, {verdict.where}"
            worst = verdict if worst.ok and not verdict.ok else worst
            worst.max_abs_err = _max(worst.max_abs_err, verdict.max_abs_err)
            worst.max_rel_err = _max(worst.max_rel_err, verdict.max_rel_err)
        return worst

    return judge


def _bits_leaf(dev: torch.Tensor, ref: torch.Tensor, source: torch.Tensor | None, nan_equal: bool) -> Verdict:
    if dev.dtype != ref.dtype or dev.shape != ref.shape:
        return Verdict(False, "output", f"device gave {dev.dtype} {tuple(dev.shape)}, CPU {ref.dtype} {tuple(ref.shape)}")
    dev, ref = dev.contiguous().reshape(-1), ref.contiguous().reshape(-1)
    same = bits(dev) == bits(ref)
    if nan_equal and dev.is_floating_point():
        same |= dev.isnan() & ref.isnan()
    abs_err, rel_err = _value_errors(dev, ref) if dev.is_floating_point() else (None, None)
    if bool(same.all()):
        return Verdict(True, max_abs_err=abs_err, max_rel_err=rel_err)
    index = int((~same).nonzero()[0, 0])
    if source is not None and source.numel() == ref.numel():
        where = f"input {describe_value(source, index)}"
    else:
        where = f"element {index}"
    detail = (f"{int((~same).sum())}/{ref.numel()} values differ; first: {where}: "
              f"device {describe_value(dev, index)}, CPU {describe_value(ref, index)}")
    return Verdict(False, where, detail, abs_err, rel_err)


def _value_errors(dev: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    d, r = dev.to(torch.float64), ref.to(torch.float64)
    finite = d.isfinite() & r.isfinite()
    if not bool(finite.any()):
        return 0.0, 0.0
    diff = (d - r).abs()[finite]
    rel = diff / r.abs()[finite].clamp_min(torch.finfo(torch.float64).tiny)
    return float(diff.max()), float(torch.where(diff == 0, 0.0, rel).max())


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def scaled_mm_bound(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                    out_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(exact, bound): the float64 product of the dequantised inputs and the largest
    error a correct float32-accumulating kernel may show against it, elementwise
    (the derivation is in conformance/fp8.py's docstring)."""
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    sa, sb = scale_a.to(torch.float64), scale_b.to(torch.float64)
    exact = (a64 @ b64) * sa * sb
    magnitude = (a64.abs() @ b64.abs()) * sa.abs() * sb.abs()
    info = torch.finfo(out_dtype)
    unit_out = info.eps / 2
    depth = a.shape[-1] + 2  # K - 1 additions, two scale multiplications, one spare
    bound = unit_out * exact.abs() + depth * FP32_UNIT_ROUNDOFF * (1 + unit_out) * magnitude
    return exact, bound + info.smallest_normal * info.eps  # one subnormal step of slack


def judge_scaled_mm(dev: torch.Tensor, ref: torch.Tensor, inputs: list[torch.Tensor]) -> Verdict:
    a, b_rows, scale_a, scale_b = inputs
    if dev.dtype != ref.dtype or dev.shape != ref.shape:
        return Verdict(False, "output", f"device gave {dev.dtype} {tuple(dev.shape)}, CPU {ref.dtype} {tuple(ref.shape)}")
    exact, bound = scaled_mm_bound(a, b_rows.t(), scale_a, scale_b, ref.dtype)
    dev64, ref64 = dev.to(torch.float64), ref.to(torch.float64)
    error = (dev64 - exact).abs()
    ratio = error / bound
    abs_err, rel_err = _value_errors(dev, ref)
    cpu_rmse = float(((ref64 - exact) ** 2).mean().sqrt())
    dev_rmse = float(((dev64 - exact) ** 2).mean().sqrt())
    err_ratio = dev_rmse / cpu_rmse if cpu_rmse > 0 else (1.0 if dev_rmse == 0 else None)
    worst = float(ratio.nan_to_num(float("inf")).max())
    if worst <= 1.0:
        return Verdict(True, "", "", abs_err, rel_err, err_ratio, worst)
    index = int((ratio.nan_to_num(float("inf")) > 1.0).reshape(-1).nonzero()[0, 0])
    row, col = divmod(index, exact.shape[1])
    where = f"output [{row}, {col}]"
    detail = (f"{int((ratio.nan_to_num(float('inf')) > 1).sum())}/{ratio.numel()} outputs outside the error bound; first at {where}: "
              f"device {float(dev64[row, col])!r}, exact {float(exact[row, col])!r}, "
              f"CPU {float(ref64[row, col])!r}, bound {float(bound[row, col]):.3g}")
    return Verdict(False, where, detail, abs_err, rel_err, err_ratio, worst)


def judge_fp8_ulp(limit: int) -> Judge:
    """FP8 outputs of arithmetic: NaN where the CPU has NaN, else within `limit` FP8 steps."""

    def judge(dev: Any, ref: Any, inputs: list[torch.Tensor]) -> Verdict:
        if dev.dtype != ref.dtype or dev.shape != ref.shape:
            return Verdict(False, "output", f"device gave {dev.dtype} {tuple(dev.shape)}, CPU {ref.dtype} {tuple(ref.shape)}")
        d, r = dev.contiguous().reshape(-1), ref.contiguous().reshape(-1)
        nan_d, nan_r = d.float().isnan(), r.float().isnan()
        steps = torch.where(nan_d | nan_r, 0, fp8_ulp_distance(d, r))
        bad = (nan_d != nan_r) | (steps > limit)
        abs_err, rel_err = _value_errors(d, r)
        if not bool(bad.any()):
            return Verdict(True, max_abs_err=abs_err, max_rel_err=rel_err, bound_ratio=float(steps.max()) / limit if steps.numel() else 0.0)
        index = int(bad.nonzero()[0, 0])
        detail = (f"{int(bad.sum())}/{r.numel()} outputs more than {limit} FP8 step(s) from the CPU's; "
                  f"first: element {index}: device {describe_value(d, index)}, CPU {describe_value(r, index)}")
        return Verdict(False, f"element {index}", detail, abs_err, rel_err)

    return judge


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
