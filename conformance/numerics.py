"""The one comparison rule every suite uses (DESIGN.md, "The numerics rule").

`compare(dev, ref, hi)` judges a device output against the CPU output in the
same dtype (`ref`) and a float64 CPU oracle (`hi`):

1. same structure, shape, dtype and NaN/Inf positions, or MISMATCH;
   integer and bool outputs must be exact;
2. PASS when every element is within assert_close's default tolerance for the
   dtype (a caller may pass looser OpInfo overrides, never tighter ones);
3. otherwise PASS when rmse(dev, hi) <= m * rmse(ref, hi) + atol_floor, with
   m = 2 for float32 and m = 3 for float16/bfloat16 and for tensors of fewer
   than SMALL_NUMEL elements, as torch._dynamo's accuracy check does: a device
   may differ from the CPU as long as it is no further from the exact answer.

FP8 (DESIGN rule 4): conversions and data movement are bit-exact (`compare_bits`),
FP8 arithmetic is judged in FP8 steps (`compare_fp8_steps`), `_scaled_mm` by a
float32-accumulation error bound (`compare_scaled_mm`). Every judge returns one
`Comparison`; conformance/outcome.py turns it into a Status.

With an oracle, every floating result also carries ulp statistics of device and CPU
(`conformance.ulp`), and an otherwise passing result is a MISMATCH when the device's
errors lean systematically where the CPU's do not (rule 5, `ulp.BiasRule`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance import ulp

# (rtol, atol) of torch.testing.assert_close, by dtype.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex32: (1e-3, 1e-5),
    torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}
FP8_DTYPES = frozenset(
    getattr(torch, name)
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
    if hasattr(torch, name)
)
HALF_DTYPES = frozenset({torch.float16, torch.bfloat16, torch.complex32})
SMALL_NUMEL = 10


@dataclasses.dataclass
class Comparison:
    """Outcome of comparing one output (possibly a tuple of tensors)."""

    ok: bool
    rule: str  # "exact", "allclose", "oracle", "bias", "structure", FP8: "fp8-steps", "error-bound"
    reason: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    err_ratio: float | None = None
    leaf: int | None = None  # index of the first failing output leaf
    where: str = ""  # the first failing place in words ("input 0x3a800001 (0.000977)", "grad lm_head.weight")
    bound_ratio: float | None = None  # error-bound judges: worst |error| / bound (<= 1 passes)
    samples: int = 1  # how many samples (or gradients) this comparison covers
    passed: int | None = None  # how many of them passed; None: all when ok, else none
    numerics: ulp.Numerics | None = None  # ulp statistics vs the float64 oracle, when one was given

    @property
    def samples_passed(self) -> int:
        return self.passed if self.passed is not None else (self.samples if self.ok else 0)

    def merge(self, other: "Comparison") -> "Comparison":
        """Worst-of two comparisons (the leaves of one output, or the samples of one item):
        failures win, errors take the maximum. Counts are the caller's to set."""
        first_fail = self if not self.ok else other
        return Comparison(
            ok=self.ok and other.ok,
            rule=first_fail.rule if not (self.ok and other.ok) else _stronger(self.rule, other.rule),
            reason=first_fail.reason if not first_fail.ok else "",
            max_abs_err=_max(self.max_abs_err, other.max_abs_err),
            max_rel_err=_max(self.max_rel_err, other.max_rel_err),
            err_ratio=_max(self.err_ratio, other.err_ratio),
            leaf=first_fail.leaf if not first_fail.ok else None,
            where=first_fail.where if not first_fail.ok else "",
            bound_ratio=_max(self.bound_ratio, other.bound_ratio),
            numerics=ulp.merge_numerics(self.numerics, other.numerics),
        )


def _max(a: float | None, b: float | None) -> float | None:
    values = [v for v in (a, b) if v is not None]
    return max(values) if values else None


_RULE_STRENGTH = ("structure", "exact", "allclose", "oracle", "bias", "fp8-steps", "error-bound")


def _stronger(a: str, b: str) -> str:
    return max(a, b, key=_RULE_STRENGTH.index)


def tolerances(dtype: torch.dtype, rtol: float | None = None, atol: float | None = None) -> tuple[float, float]:
    """assert_close's defaults for `dtype`, loosened (never tightened) by overrides."""
    base_rtol, base_atol = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
    return max(base_rtol, rtol or 0.0), max(base_atol, atol or 0.0)


def atol_floor(dtype: torch.dtype) -> float:
    """Absolute slack of rule 3, a tenth of the dtype's default atol."""
    return DEFAULT_TOLERANCES.get(dtype, (0.0, 1e-5))[1] / 10


def multiplier(dtype: torch.dtype, numel: int) -> float:
    return 3.0 if dtype in HALF_DTYPES or numel < SMALL_NUMEL else 2.0


def compare(
    dev: Any,
    ref: Any,
    hi: Any = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    exact: bool = False,
    bias_rule: bool = True,
) -> Comparison:
    """Judge `dev` (any device) against CPU `ref` and optional float64 oracle `hi`.

    `bias_rule=False` measures ulp statistics without judging them: for a caller that judges
    them over many samples itself (OpInfo with an expected rounding)."""
    dev_leaves, dev_spec = pytree.tree_flatten(dev)
    ref_leaves, ref_spec = pytree.tree_flatten(ref)
    if dev_spec != ref_spec:
        return Comparison(False, "structure", f"output structure differs: {dev_spec} vs {ref_spec}")
    hi_leaves = pytree.tree_flatten(hi)[0] if hi is not None else [None] * len(ref_leaves)
    if len(hi_leaves) != len(ref_leaves):
        hi_leaves = [None] * len(ref_leaves)
    total = Comparison(True, "exact")
    for index, (d, r, h) in enumerate(zip(dev_leaves, ref_leaves, hi_leaves)):
        result = compare_leaf(d, r, h, rtol=rtol, atol=atol, exact=exact, bias_rule=bias_rule)
        if not result.ok:
            result.leaf = index
            if len(ref_leaves) > 1:
                result.reason = f"output {index}: {result.reason}"
        total = total.merge(result)
    return total


def compare_leaf(dev: Any, ref: Any, hi: Any = None, *, rtol=None, atol=None, exact=False, bias_rule=True) -> Comparison:
    if not isinstance(ref, torch.Tensor):
        return _compare_scalar(dev, ref, hi, rtol=rtol, atol=atol, exact=exact)
    if not isinstance(dev, torch.Tensor):
        return Comparison(False, "structure", f"expected a tensor, got {type(dev).__name__}")
    if dev.dtype != ref.dtype:
        return Comparison(False, "structure", f"dtype {_dt(dev.dtype)} differs from CPU's {_dt(ref.dtype)}")
    if dev.shape != ref.shape:
        return Comparison(False, "structure", f"shape {tuple(dev.shape)} differs from CPU's {tuple(ref.shape)}")
    if dev.layout != torch.strided or ref.layout != torch.strided:
        dev, ref = dev.to_dense(), ref.to_dense()
        hi = hi.to_dense() if isinstance(hi, torch.Tensor) else hi
    dev = dev.detach().to("cpu")
    ref = ref.detach()
    if ref.dtype in FP8_DTYPES:
        return _with_numerics(compare_bits(dev, ref), dev, ref, hi, judge=False)
    if not (ref.is_floating_point() or ref.is_complex()):
        equal = torch.equal(dev, ref)
        reason = "" if equal else _first_difference(dev, ref)
        return Comparison(equal, "exact", reason, *(_errors(dev.double(), ref.double()) if ref.numel() else (0.0, 0.0)))
    if ref.is_complex():
        dev, ref = torch.view_as_real(dev.resolve_conj()), torch.view_as_real(ref.resolve_conj())
        if isinstance(hi, torch.Tensor) and hi.is_complex():
            hi = torch.view_as_real(hi.resolve_conj())
    result = _compare_float(dev, ref, hi, rtol=rtol, atol=atol, exact=exact)
    return _with_numerics(result, dev, ref, hi, judge=bias_rule and not exact)


def _with_numerics(result: Comparison, dev, ref, hi, judge: bool) -> Comparison:
    """Attach ulp statistics (rule 5) and turn a PASS into a MISMATCH when the device leans."""
    if result.rule == "structure" or not isinstance(hi, torch.Tensor) or hi.shape != ref.shape \
            or ref.dtype not in ulp.rounding_dtypes() or ref.numel() == 0:
        return result
    result.numerics = ulp.Numerics.of(dev.double(), ref.double(), hi.detach().double(), ref.dtype)
    reason = result.numerics.verdict() if result.ok and judge else None
    return dataclasses.replace(result, ok=False, rule="bias", reason=reason) if reason else result


def _compare_float(dev, ref, hi, *, rtol, atol, exact) -> Comparison:
    if ref.numel() == 0:
        return Comparison(True, "exact", "", 0.0, 0.0)
    dev64, ref64 = dev.double(), ref.double()
    nan_dev, nan_ref = dev64.isnan(), ref64.isnan()
    if not torch.equal(nan_dev, nan_ref):
        where = _first_index(nan_dev ^ nan_ref)
        return Comparison(False, "structure", f"NaN positions differ (first at index {where}: device {_val(dev64, where)}, CPU {_val(ref64, where)})")
    inf_dev = dev64.isinf()
    if not torch.equal(inf_dev, ref64.isinf()) or not torch.equal(dev64[inf_dev], ref64[inf_dev]):
        where = _first_index((inf_dev ^ ref64.isinf()) | (inf_dev & (dev64 != ref64)))
        return Comparison(False, "structure", f"Inf positions differ (first at index {where}: device {_val(dev64, where)}, CPU {_val(ref64, where)})")
    finite = ~(nan_ref | ref64.isinf())
    max_abs, max_rel = _errors(dev64[finite], ref64[finite])
    ratio = None
    if isinstance(hi, torch.Tensor) and hi.shape == ref.shape:
        ratio = _err_ratio(dev64[finite], ref64[finite], hi.detach().double()[finite])
    if exact:
        ok = torch.equal(dev64[finite], ref64[finite])
        return Comparison(ok, "exact", "" if ok else _first_difference(dev64, ref64), max_abs, max_rel, ratio)
    r, a = tolerances(ref.dtype, rtol, atol)
    close = (dev64 - ref64).abs() <= a + r * ref64.abs()
    close |= ~finite
    if bool(close.all()):
        return Comparison(True, "allclose", "", max_abs, max_rel, ratio)
    if isinstance(hi, torch.Tensor) and hi.shape == ref.shape:
        hi64 = hi.detach().double()[finite]
        dev_err = _rmse(dev64[finite], hi64)
        ref_err = _rmse(ref64[finite], hi64)
        bound = multiplier(ref.dtype, ref.numel()) * ref_err + atol_floor(ref.dtype)
        if dev_err <= bound:
            return Comparison(True, "oracle", "", max_abs, max_rel, ratio)
        oracle_note = f"; rmse vs float64 oracle {dev_err:.3g} > bound {bound:.3g} (CPU's {ref_err:.3g})"
    else:
        oracle_note = "; no float64 oracle"
    where = _first_index(~close)
    mismatched = int((~close).sum())
    reason = (
        f"{mismatched}/{ref.numel()} elements outside rtol={r:g} atol={a:g}; max abs err {max_abs:.3g}, "
        f"max rel err {max_rel:.3g}; first at index {where}: device {_val(dev64, where)}, CPU {_val(ref64, where)}"
        + oracle_note
    )
    return Comparison(False, "oracle", reason, max_abs, max_rel, ratio)


def _compare_scalar(dev, ref, hi, *, rtol, atol, exact) -> Comparison:
    if isinstance(ref, (bool, int, str, type(None))) or not isinstance(ref, (float, complex)):
        ok = dev == ref
        return Comparison(bool(ok), "exact", "" if ok else f"value {dev!r} differs from CPU's {ref!r}")
    if not isinstance(dev, (int, float, complex)):
        return Comparison(False, "structure", f"expected a number, got {type(dev).__name__}")
    to_tensor = lambda v: torch.tensor(v, dtype=torch.float64 if isinstance(ref, float) else torch.complex128)
    return compare_leaf(to_tensor(dev), to_tensor(ref), to_tensor(hi) if isinstance(hi, (int, float, complex)) else None,
                        rtol=max(rtol or 0.0, 1.3e-6), atol=max(atol or 0.0, 1e-5), exact=exact)


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.numel() == 0:
        return 0.0
    return float(((a - b) ** 2).mean().sqrt())


def _errors(dev: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    if dev.numel() == 0:
        return 0.0, 0.0
    diff = (dev - ref).abs()
    finite = diff.isfinite()
    if not bool(finite.any()):
        return 0.0, 0.0
    diff = diff[finite]
    rel = diff / ref.abs()[finite].clamp_min(torch.finfo(torch.float64).tiny)
    rel = torch.where(diff == 0, torch.zeros_like(rel), rel)
    return float(diff.max()), float(rel.max())


def _err_ratio(dev: torch.Tensor, ref: torch.Tensor, hi: torch.Tensor) -> float | None:
    dev_err, ref_err = _rmse(dev, hi), _rmse(ref, hi)
    if ref_err == 0.0:
        return 1.0 if dev_err == 0.0 else None
    ratio = dev_err / ref_err
    return ratio if math.isfinite(ratio) else None


def _first_index(mask: torch.Tensor) -> tuple[int, ...] | int:
    flat = int(mask.reshape(-1).nonzero()[0, 0])
    if mask.dim() <= 1:
        return flat
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), mask.shape))


def _val(t: torch.Tensor, where: Any) -> str:
    value = t[where] if isinstance(where, tuple) else t.reshape(-1)[where]
    return f"{float(value):.6g}"


def _first_difference(dev: torch.Tensor, ref: torch.Tensor) -> str:
    if dev.numel() == 0:
        return "values differ"
    where = _first_index(dev != ref)
    d = dev[where] if isinstance(where, tuple) else dev.reshape(-1)[where]
    r = ref[where] if isinstance(where, tuple) else ref.reshape(-1)[where]
    return f"values differ; first at index {where}: device {d.item()!r}, CPU {r.item()!r}"


def _dt(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")



# -- FP8 (DESIGN rule 4) ------------------------------------------------------------------

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
    return _errors(dev.to(torch.float64), ref.to(torch.float64))


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
    worst.max_abs_err = _max(total.max_abs_err, one.max_abs_err)
    worst.max_rel_err = _max(total.max_rel_err, one.max_rel_err)
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
    err_ratio = _err_ratio(dev64, ref64, exact)
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
