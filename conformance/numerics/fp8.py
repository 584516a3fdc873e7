"""FP8 judges (DESIGN rule 4): conversions and data movement are bit-exact (`compare_bits`),
FP8 arithmetic is judged in FP8 steps (`compare_fp8_steps`), `_scaled_mm` by a
float32-accumulation error bound (`compare_scaled_mm`). Each returns the rule's one
`Comparison`; conformance/outcome.py turns it into a Status.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.numerics.comparison import Comparison, error_ratio, larger, max_errors

# Integer dtype of the same width, to look at and step through bit patterns.
_BITS_DTYPE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
FP32_UNIT_ROUNDOFF = 2.0 ** -24


def bits(t: torch.Tensor) -> torch.Tensor:
    """The bit patterns of a floating tensor, as an integer tensor of the same width."""
    return t.view(_BITS_DTYPE[t.element_size()])


def bit_width(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size() * 8


def describe_value(t: torch.Tensor, index: int) -> str:
    """'0x43e00000 (448.0)': the bit pattern and value of element `index` (flat)."""
    flat = t.reshape(-1)
    pattern = int(bits(flat[index : index + 1])[0]) & ((1 << bit_width(t.dtype)) - 1)
    digits = bit_width(t.dtype) // 4
    value = float(flat[index].to(torch.float32)) if t.dtype != torch.float64 else float(flat[index])
    return f"0x{pattern:0{digits}x} ({value!r})"


def first_bit_difference(dev: torch.Tensor, ref: torch.Tensor) -> int | None:
    """Flat index of the first element whose bit pattern differs (NaN payloads count), or None."""
    differ = bits(dev.contiguous().reshape(-1)) != bits(ref.contiguous().reshape(-1))
    return int(differ.nonzero()[0, 0]) if bool(differ.any()) else None


def _shape_differs(dev: torch.Tensor, ref: torch.Tensor) -> Comparison | None:
    if dev.dtype != ref.dtype or dev.shape != ref.shape:
        return Comparison(False, "structure", f"device gave {dev.dtype} {tuple(dev.shape)}, CPU {ref.dtype} {tuple(ref.shape)}",
                          where="output")
    return None


def _float_errors(dev: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    return max_errors(dev.to(torch.float64), ref.to(torch.float64))


def compare_bits(dev: Any, ref: Any, *, nan_equal: bool = False, source: torch.Tensor | None = None) -> Comparison:
    """Bit-exact: every output bit pattern equals the CPU's. With `nan_equal`, any NaN matches any
    NaN (IEEE 754 leaves sign and payload of a converted NaN open). With `source` (the input the
    outputs were converted from, element for element), a difference is named by that input."""
    dev_leaves, ref_leaves = pytree.tree_leaves(dev), pytree.tree_leaves(ref)
    if len(dev_leaves) != len(ref_leaves):
        return Comparison(False, "structure", f"{len(dev_leaves)} outputs, CPU gave {len(ref_leaves)}",
                          where="output structure")
    total = Comparison(True, "exact")
    for number, (d, r) in enumerate(zip(dev_leaves, ref_leaves)):
        one = _shape_differs(d, r) or _bits_leaf(d, r, source, nan_equal)
        if len(ref_leaves) > 1 and not one.ok:
            one.where = f"output {number}, {one.where}"
        one.leaf = None if one.ok else number
        total = _worst(total, one)
    return total


def _worst(total: Comparison, one: Comparison) -> Comparison:
    """The first failure, with the largest errors over all leaves (one sample: counts stay 1)."""
    worst = one if total.ok and not one.ok else total
    worst.max_abs_err = larger(total.max_abs_err, one.max_abs_err)
    worst.max_rel_err = larger(total.max_rel_err, one.max_rel_err)
    return worst


def _bits_leaf(dev: torch.Tensor, ref: torch.Tensor, source: torch.Tensor | None, nan_equal: bool) -> Comparison:
    dev, ref = dev.contiguous().reshape(-1), ref.contiguous().reshape(-1)
    same = bits(dev) == bits(ref)
    if nan_equal and dev.is_floating_point():
        same |= dev.isnan() & ref.isnan()
    abs_err, rel_err = _float_errors(dev, ref) if dev.is_floating_point() else (None, None)
    if bool(same.all()):
        return Comparison(True, "exact", "", abs_err, rel_err)
    index = int((~same).nonzero()[0, 0])
    if source is not None and source.numel() == ref.numel():
        where = f"input {describe_value(source, index)}"
    else:
        where = f"element {index}"
    reason = (f"{int((~same).sum())}/{ref.numel()} values differ; first: {where}: "
              f"device {describe_value(dev, index)}, CPU {describe_value(ref, index)}")
    return Comparison(False, "exact", reason, abs_err, rel_err, where=where)


def fp8_ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Distance in representable FP8 steps between two FP8 tensors of one dtype.

    Codes are mapped to a monotonic integer line (sign-magnitude to two's
    complement) so that adjacent finite values are 1 apart and +0/-0 are 0.
    """
    def ordinal(t: torch.Tensor) -> torch.Tensor:
        pattern = t.view(torch.uint8).to(torch.int32)
        magnitude = pattern & 0x7F
        return torch.where(pattern & 0x80 != 0, -magnitude, magnitude)

    return (ordinal(a) - ordinal(b)).abs()


def compare_fp8_steps(dev: torch.Tensor, ref: torch.Tensor, limit: int) -> Comparison:
    """FP8 outputs of arithmetic: NaN where the CPU has NaN, else within `limit` FP8 steps."""
    differs = _shape_differs(dev, ref)
    if differs is not None:
        return differs
    d, r = dev.contiguous().reshape(-1), ref.contiguous().reshape(-1)
    nan_d, nan_r = d.float().isnan(), r.float().isnan()
    steps = torch.where(nan_d | nan_r, 0, fp8_ulp_distance(d, r))
    bad = (nan_d != nan_r) | (steps > limit)
    abs_err, rel_err = _float_errors(d, r)
    if not bool(bad.any()):
        return Comparison(True, "fp8-steps", "", abs_err, rel_err,
                          bound_ratio=float(steps.max()) / limit if steps.numel() else 0.0)
    index = int(bad.nonzero()[0, 0])
    reason = (f"{int(bad.sum())}/{r.numel()} outputs more than {limit} FP8 step(s) from the CPU's; "
              f"first: element {index}: device {describe_value(d, index)}, CPU {describe_value(r, index)}")
    return Comparison(False, "fp8-steps", reason, abs_err, rel_err, where=f"element {index}")


def scaled_mm_bound(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                    out_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(exact, bound): the float64 product of the dequantised inputs and the largest error a
    correct float32-accumulating kernel may show against it, elementwise (the derivation is in
    conformance/fp8/suite.py's docstring)."""
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    sa, sb = scale_a.to(torch.float64), scale_b.to(torch.float64)
    exact = (a64 @ b64) * sa * sb
    magnitude = (a64.abs() @ b64.abs()) * sa.abs() * sb.abs()
    info = torch.finfo(out_dtype)
    unit_out = info.eps / 2
    depth = a.shape[-1] + 2  # K - 1 additions, two scale multiplications, one spare
    bound = unit_out * exact.abs() + depth * FP32_UNIT_ROUNDOFF * (1 + unit_out) * magnitude
    return exact, bound + info.smallest_normal * info.eps  # one subnormal step of slack


def compare_scaled_mm(dev: torch.Tensor, ref: torch.Tensor, a: torch.Tensor, b_rows: torch.Tensor,
                      scale_a: torch.Tensor, scale_b: torch.Tensor) -> Comparison:
    """`_scaled_mm(a, b_rows.t(), scale_a, scale_b)` on the device within `scaled_mm_bound`."""
    differs = _shape_differs(dev, ref)
    if differs is not None:
        return differs
    exact, bound = scaled_mm_bound(a, b_rows.t(), scale_a, scale_b, ref.dtype)
    dev64, ref64 = dev.to(torch.float64), ref.to(torch.float64)
    ratio = ((dev64 - exact).abs() / bound).nan_to_num(float("inf"))
    abs_err, rel_err = _float_errors(dev, ref)
    err_ratio = error_ratio(dev64, ref64, exact)
    worst = float(ratio.max())
    if worst <= 1.0:
        return Comparison(True, "error-bound", "", abs_err, rel_err, err_ratio, bound_ratio=worst)
    index = int((ratio > 1.0).reshape(-1).nonzero()[0, 0])
    row, col = divmod(index, exact.shape[1])
    where = f"output [{row}, {col}]"
    reason = (f"{int((ratio > 1).sum())}/{ratio.numel()} outputs outside the error bound; first at {where}: "
              f"device {float(dev64[row, col])!r}, exact {float(exact[row, col])!r}, "
              f"CPU {float(ref64[row, col])!r}, bound {float(bound[row, col]):.3g}")
    return Comparison(False, "error-bound", reason, abs_err, rel_err, err_ratio, where=where, bound_ratio=worst)
