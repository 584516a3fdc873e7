"""The numerics rule for floating and integer outputs (DESIGN.md, "The numerics rule").

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

With an oracle, every floating result also carries ulp statistics of device and CPU
(`conformance.numerics.ulp`), and an otherwise passing result is a MISMATCH when the
device's errors lean systematically where the CPU's do not (rule 5, `ulp.BiasRule`).

Rule 6: a correct implementation is never a MISMATCH. `composite` is the device's own op
sequence replayed on the CPU in the same dtype (conformance/reference/replay.py): where the device
ran a decomposition or another low-precision algorithm than the CPU's kernel, rules 2 and
3 are applied once more with that result as the reference, and a result within them passes
with a note ("less accurate than the CPU kernel ..."); the replay runs the CPU's
primitives, so a fault in any primitive of the device still fails. Inf and NaN the CPU and
the device disagree on are settled by the oracle (`oracle.settle_nonfinite`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.numerics import ulp
from conformance.numerics.comparison import Comparison, error_ratio, max_errors, rmse
from conformance.numerics.fp8 import compare_bits
from conformance.numerics.oracle import settle_nonfinite

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
# Rule 6: how much worse than the device's own op sequence replayed on the CPU in the same
# dtype a result may be (flash-attention's tests allow 2x a reference computed in the low dtype).
COMPOSITE_MULTIPLIER = 2.0


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
    composite: Any = None,
) -> Comparison:
    """Judge `dev` (any device) against CPU `ref` and optional float64 oracle `hi`.

    `bias_rule=False` measures ulp statistics without judging them: for a caller that judges
    them over many samples itself (OpInfo with an expected rounding). `composite`: the
    device's own op sequence run on the CPU in the same dtype, the second reference of rule 6
    (against the oracle; where there is none, its distance from the CPU's result bounds the
    device's)."""
    dev_leaves, dev_spec = pytree.tree_flatten(dev)
    ref_leaves, ref_spec = pytree.tree_flatten(ref)
    if dev_spec != ref_spec:
        return Comparison(False, "structure", f"output structure differs: {dev_spec} vs {ref_spec}")
    hi_leaves = pytree.tree_flatten(hi)[0] if hi is not None else [None] * len(ref_leaves)
    if len(hi_leaves) != len(ref_leaves):
        hi_leaves = [None] * len(ref_leaves)
    composite_leaves = pytree.tree_flatten(composite)[0] if composite is not None else []
    if len(composite_leaves) != len(ref_leaves):
        composite_leaves = [None] * len(ref_leaves)
    total = Comparison(True, "exact")
    for index, (d, r, h, c) in enumerate(zip(dev_leaves, ref_leaves, hi_leaves, composite_leaves)):
        result = compare_leaf(d, r, h, rtol=rtol, atol=atol, exact=exact, bias_rule=bias_rule, composite=c)
        if not result.ok:
            result.leaf = index
            if len(ref_leaves) > 1:
                result.reason = f"output {index}: {result.reason}"
        total = total.merge(result)
    return total


def compare_leaf(dev: Any, ref: Any, hi: Any = None, *, rtol=None, atol=None, exact=False, bias_rule=True,
                 composite: Any = None) -> Comparison:
    if not isinstance(ref, torch.Tensor):
        return _compare_scalar(dev, ref, hi, rtol=rtol, atol=atol, exact=exact)
    if not isinstance(dev, torch.Tensor):
        return Comparison(False, "structure", f"expected a tensor, got {type(dev).__name__}")
    if dev.dtype != ref.dtype:
        return Comparison(False, "structure", f"dtype {_dt(dev.dtype)} differs from CPU's {_dt(ref.dtype)}")
    if dev.shape != ref.shape:
        return Comparison(False, "structure", f"shape {tuple(dev.shape)} differs from CPU's {tuple(ref.shape)}")
    if not (isinstance(composite, torch.Tensor) and composite.dtype == ref.dtype and composite.shape == ref.shape):
        composite = None
    if dev.layout != torch.strided or ref.layout != torch.strided:
        dev, ref = dev.to_dense(), ref.to_dense()
        hi = hi.to_dense() if isinstance(hi, torch.Tensor) else hi
        composite = composite.to_dense() if composite is not None else None
    dev = dev.detach().to("cpu")
    ref = ref.detach()
    if ref.dtype in FP8_DTYPES:
        return _with_numerics(compare_bits(dev, ref), dev, ref, hi, ref.dtype, judge=False)
    if not (ref.is_floating_point() or ref.is_complex()):
        equal = torch.equal(dev, ref)
        reason = "" if equal else _first_difference(dev, ref)
        return Comparison(equal, "exact", reason, *(max_errors(dev.double(), ref.double()) if ref.numel() else (0.0, 0.0)))
    if ref.is_complex():
        dev, ref = torch.view_as_real(dev.resolve_conj()), torch.view_as_real(ref.resolve_conj())
        if isinstance(hi, torch.Tensor) and hi.is_complex():
            hi = torch.view_as_real(hi.resolve_conj())
        composite = torch.view_as_real(composite.resolve_conj()) if composite is not None else None
    # One float64 copy of each side serves the rule and the ulp statistics alike.
    dev64, ref64 = dev.double(), ref.double()
    identical = _bit_identical(dev, ref)
    result = _compare_float(dev64, ref64, hi, dtype=ref.dtype, rtol=rtol, atol=atol, exact=exact, composite=composite,
                            identical=identical)
    # Passing by the second reference, the device's lean is weighed against that reference's.
    if result.rule == "composite":
        return _with_numerics(result, dev64, composite.detach().to("cpu").double(), hi, ref.dtype,
                              judge=bias_rule and not exact)
    return _with_numerics(result, dev64, ref64, hi, ref.dtype, judge=bias_rule and not exact, identical=identical)


def numerics_against(dev: Any, peer: Any, hi: Any) -> ulp.Numerics | None:
    """ulp statistics of `dev` with `peer` in the CPU's place: rule 5 weighs a device that runs
    its own op sequence against that sequence on the CPU (rule 6), not against the CPU's kernel."""
    total = None
    for d, p, h in zip(pytree.tree_leaves(dev), pytree.tree_leaves(peer), pytree.tree_leaves(hi)):
        if not all(isinstance(t, torch.Tensor) and t.layout == torch.strided for t in (d, p, h)) \
                or d.shape != p.shape or p.shape != h.shape or d.dtype != p.dtype or p.numel() == 0:
            continue
        if p.is_complex():
            d, p, h = (torch.view_as_real(t.detach().resolve_conj()) for t in (d, p, h))
        if p.dtype not in ulp.rounding_dtypes():
            continue
        measured = ulp.Numerics.of(d.detach().cpu().double(), p.detach().double(), h.detach().double(), p.dtype)
        total = ulp.merge_numerics(total, measured)
    return total


def _bit_identical(dev: torch.Tensor, ref: torch.Tensor) -> bool:
    """Whether the device returned the CPU's very bits (NaN payloads and signed zeros included),
    as a device running the CPU's own kernels does: then every measure of the device is the CPU's."""
    width = _SAME_WIDTH_INTS.get(dev.dtype.itemsize)
    if width is None:
        return False
    return torch.equal(dev.view(width), ref.view(width))


_SAME_WIDTH_INTS = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _with_numerics(result: Comparison, dev, ref, hi, dtype: torch.dtype, judge: bool,
                   identical: bool = False) -> Comparison:
    """Attach ulp statistics (rule 5) of `dev` and `ref` (values in `dtype`) and turn a PASS into a
    MISMATCH when the device leans; `identical`: the two are the same bits, measured once."""
    if result.rule in ("structure", "nonfinite") or not isinstance(hi, torch.Tensor) or hi.shape != ref.shape \
            or dtype not in ulp.rounding_dtypes() or ref.numel() == 0:
        return result
    result.numerics = ulp.Numerics.of(dev.double(), None if identical else ref.double(), hi.detach().double(), dtype)
    reason = result.numerics.verdict() if result.ok and judge else None
    return dataclasses.replace(result, ok=False, rule="bias", reason=reason) if reason else result


def _compare_float(dev64, ref64, hi, *, dtype, rtol, atol, exact, composite=None, identical=False) -> Comparison:
    """Rules 1 to 3 and 6 on float64 copies of values in `dtype`; `identical`: the device's bits are the CPU's."""
    if ref64.numel() == 0:
        return Comparison(True, "exact", "", 0.0, 0.0)
    hi64 = hi.detach().double() if isinstance(hi, torch.Tensor) and hi.shape == ref64.shape else None
    if identical:
        return _identical(ref64, hi64, exact)
    note = ""
    if hi64 is not None and not exact:
        ref64, note = settle_nonfinite(dev64, ref64, hi64, dtype)
    failed = _nonfinite_difference(dev64, ref64)
    if failed is not None:
        return failed
    finite = ref64.isfinite()
    max_abs, max_rel = max_errors(dev64[finite], ref64[finite])
    ratio = None if hi64 is None else error_ratio(dev64[finite], ref64[finite], hi64[finite])
    if exact:
        ok = torch.equal(dev64[finite], ref64[finite])
        return Comparison(ok, "exact", "" if ok else _first_difference(dev64, ref64), max_abs, max_rel, ratio)
    r, a = tolerances(dtype, rtol, atol)
    close = (dev64 - ref64).abs() <= a + r * ref64.abs()
    close |= ~finite
    if bool(close.all()):
        return Comparison(True, "allclose", "", max_abs, max_rel, ratio, note=note)
    if hi64 is not None:
        hi64 = hi64[finite]
        dev_err = rmse(dev64[finite], hi64)
        ref_err = rmse(ref64[finite], hi64)
        m = multiplier(dtype, ref64.numel())
        bound = m * ref_err + atol_floor(dtype)
        if dev_err <= bound:
            return Comparison(True, "oracle", "", max_abs, max_rel, ratio, note=note)
        oracle_note = f"; rmse vs float64 oracle {dev_err:.3g} > bound {bound:.3g} (CPU's {ref_err:.3g})"
        comp64 = _finite_composite(composite, finite)
        second = None if comp64 is None else _composite_bound(dev_err, ref_err, comp64, hi64, dtype)
    else:
        oracle_note = "; no float64 oracle"
        comp64 = _finite_composite(composite, finite)
        second = None if comp64 is None else _composite_distance(dev64[finite], ref64[finite], comp64, dtype)
    if second is not None and second[0]:
        return Comparison(True, "composite", "", max_abs, max_rel, ratio, note=_join(second[1], note))
    if second is not None:
        oracle_note += f"; {second[1]}"
    where = _first_index(~close)
    mismatched = int((~close).sum())
    reason = (
        f"{mismatched}/{ref64.numel()} elements outside rtol={r:g} atol={a:g}; max abs err {max_abs:.3g}, "
        f"max rel err {max_rel:.3g}; first at index {where}: device {_val(dev64, where)}, CPU {_val(ref64, where)}"
        + oracle_note
    )
    return Comparison(False, "oracle", reason, max_abs, max_rel, ratio)


def _identical(ref64: torch.Tensor, hi64: torch.Tensor | None, exact: bool) -> Comparison:
    """What the rule finds for a device result that is the CPU's bits, without measuring the same
    thing twice: NaN and Inf in the same places, no error, every element within any tolerance, and
    the device's distance from the oracle the CPU's (error ratio 1, or none where that is not finite)."""
    ratio = None
    if hi64 is not None:
        finite = ref64.isfinite()
        ref_err = rmse(ref64[finite], hi64[finite])
        ratio = 1.0 if ref_err == 0.0 or math.isfinite(ref_err) else None
    return Comparison(True, "exact" if exact else "allclose", "", 0.0, 0.0, ratio)


def _nonfinite_difference(dev64: torch.Tensor, ref64: torch.Tensor) -> Comparison | None:
    """Rule 1 for NaN and Inf: the places (and signs of Inf) must agree."""
    nan_dev, nan_ref = dev64.isnan(), ref64.isnan()
    if not torch.equal(nan_dev, nan_ref):
        where = _first_index(nan_dev ^ nan_ref)
        return Comparison(False, "nonfinite", f"NaN positions differ (first at index {where}: device {_val(dev64, where)}, CPU {_val(ref64, where)})")
    inf_dev, inf_ref = dev64.isinf(), ref64.isinf()
    if not torch.equal(inf_dev, inf_ref) or not torch.equal(dev64[inf_dev], ref64[inf_dev]):
        where = _first_index((inf_dev ^ inf_ref) | (inf_dev & (dev64 != ref64)))
        return Comparison(False, "nonfinite", f"Inf positions differ (first at index {where}: device {_val(dev64, where)}, CPU {_val(ref64, where)})")
    return None


def _finite_composite(composite: torch.Tensor | None, finite: torch.Tensor) -> torch.Tensor | None:
    """Rule 6's second reference at the CPU's finite places, in float64; None without one, or
    where it is not finite there."""
    if composite is None:
        return None
    comp64 = composite.detach().to("cpu").double()[finite]
    return comp64 if bool(comp64.isfinite().all()) else None


def _composite_bound(dev_err: float, ref_err: float, comp64: torch.Tensor, hi64: torch.Tensor,
                     dtype: torch.dtype) -> tuple[bool, str] | None:
    """(passes, words) for rule 6's second bound, or None when the second reference excuses nothing."""
    comp_err = rmse(comp64, hi64)
    if comp_err <= ref_err:
        return None  # the device's sequence is no less accurate than the CPU's kernel: nothing to excuse
    bound = COMPOSITE_MULTIPLIER * comp_err + atol_floor(dtype)
    times = lambda err: f"{err / ref_err:.1f}x" if ref_err > 0 else "inf x"  # noqa: E731
    if dev_err <= bound:
        return True, (f"less accurate than the CPU kernel: composite implementation, {times(dev_err)} its error "
                      f"(the device's own op sequence run on the CPU in {_dt(dtype)}: {times(comp_err)})")
    return False, (f"the device's own op sequence run on the CPU in {_dt(dtype)}: rmse {comp_err:.3g}, "
                   f"second bound {bound:.3g}")


def _composite_distance(dev64: torch.Tensor, ref64: torch.Tensor, comp64: torch.Tensor,
                        dtype: torch.dtype) -> tuple[bool, str] | None:
    """Rule 6 where no float64 oracle exists (a model that hard-codes float32): how far a correct
    implementation, the device's own op sequence run on the CPU in the same dtype, lands from the
    CPU's kernel is how far the device may land, times COMPOSITE_MULTIPLIER. (passes, words), or
    None when that sequence lands on the CPU's result. Every tensor holds the finite places only."""
    comp_dist = rmse(comp64, ref64)
    if comp_dist == 0:
        return None
    dev_dist = rmse(dev64, ref64)
    bound = COMPOSITE_MULTIPLIER * comp_dist + atol_floor(dtype)
    sequence = f"the device's own op sequence run on the CPU in {_dt(dtype)}"
    if dev_dist <= bound:
        return True, (f"no float64 oracle; composite implementation: {dev_dist / comp_dist:.1f}x the distance from "
                      f"the CPU kernel of {sequence}")
    return False, f"{sequence}: rmse from the CPU {comp_dist:.3g}, second bound {bound:.3g}"


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _compare_scalar(dev, ref, hi, *, rtol, atol, exact) -> Comparison:
    if isinstance(ref, (bool, int, str, type(None))) or not isinstance(ref, (float, complex)):
        ok = dev == ref
        return Comparison(bool(ok), "exact", "" if ok else f"value {dev!r} differs from CPU's {ref!r}")
    if not isinstance(dev, (int, float, complex)):
        return Comparison(False, "structure", f"expected a number, got {type(dev).__name__}")
    to_tensor = lambda v: torch.tensor(v, dtype=torch.float64 if isinstance(ref, float) else torch.complex128)
    return compare_leaf(to_tensor(dev), to_tensor(ref), to_tensor(hi) if isinstance(hi, (int, float, complex)) else None,
                        rtol=max(rtol or 0.0, 1.3e-6), atol=max(atol or 0.0, 1e-5), exact=exact)


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
