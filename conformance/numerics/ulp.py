"""Error statistics in ulps against the float64 oracle, and how a result was rounded.

Pure functions over tensors (DESIGN.md, "The numerics rule", rule 5). For one output in a
floating dtype (float32, bfloat16, float16, FP8) and its exact value `hi` (the float64
oracle) this module measures, for the device and for the CPU alike:

* the error of every element in ulps of the output dtype, at the oracle's magnitude
  (subnormals have the fixed ulp of the smallest normal binade);
* max and mean |error|, the mean signed error (bias) with its standard error, and the mean
  error in the direction of the magnitude (negative for round-toward-zero whatever the sign);
* the share of correctly rounded elements (equal to the nearest-even rounding of `hi`);
* evidence for the rounding rule: on the elements where the rules disagree, which of
  nearest-even, toward-zero and double rounding (via a wider narrow format) the value took,
  and how often it went to the upper neighbour compared with the fractional position
  (stochastic rounding goes up with exactly that probability).

Statistics are sums, so samples and output leaves merge by addition (`UlpStats.merge`).
Rounding into a narrow format is done here exactly in float64 (torch's float64 -> bfloat16
cast rounds twice, via float32); the sim faults use the same functions.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import torch
from torch.utils import _pytree as pytree

from op_db.records import ROUNDING_CLASSES

NEAREST_EVEN, TOWARD_ZERO, STOCHASTIC, DOUBLE_ROUNDING, UNKNOWN = ROUNDING_CLASSES
ROUNDING_WORDS = {
    NEAREST_EVEN: "round-to-nearest-even", TOWARD_ZERO: "round-toward-zero",
    STOCHASTIC: "stochastic rounding", DOUBLE_ROUNDING: "double rounding", UNKNOWN: "no known rounding rule",
}
# The wider narrow format a careless conversion passes through ("double rounding").
DOUBLE_ROUNDING_VIA: dict[torch.dtype, torch.dtype] = {torch.bfloat16: torch.float16}
for _name in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _name):
        DOUBLE_ROUNDING_VIA[getattr(torch, _name)] = torch.bfloat16

# Rounding rules that are a MISMATCH where the CPU rounds to nearest-even (unless expected).
FAULTY_ROUNDING = frozenset({TOWARD_ZERO, DOUBLE_ROUNDING})
# Classification needs this many elements on which nearest-even and toward-zero disagree
# (OpInfo's default samples of a unary op hold ~20 elements in all, half of them deciding).
MIN_EVIDENCE = 8
STOCHASTIC_EVIDENCE = 4 * MIN_EVIDENCE
RULE_SHARE = 0.9  # share of the deciding elements a deterministic rule must explain
NEIGHBOUR_SHARE = 0.9  # share of inexact elements that must land on a neighbour of the exact value


@functools.cache  # asked for every output leaf judged
def rounding_dtypes() -> tuple[torch.dtype, ...]:
    """The output dtypes this module measures."""
    return (torch.float32, torch.bfloat16, torch.float16, *(d for d in DOUBLE_ROUNDING_VIA if d.itemsize == 1))


def ulp(hi: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of `dtype`'s values at the magnitude of each element of `hi` (float64)."""
    info = torch.finfo(dtype)
    # Below the smallest normal (zero included) the spacing is that of the lowest binade.
    _, exponent = torch.frexp(hi.abs().clamp_min(info.smallest_normal))
    return info.eps * torch.exp2((exponent - 1).to(torch.float64))


# In steps of the ulp at `hi` (exact: a division by a power of two) nearest-even is `round`
# (ties to even) and toward-zero is `trunc`; a result that reaches the next binade up is
# still a multiple of the finer spacing, so the products below are representable.


def round_nearest_even(hi: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`hi` (float64) rounded once, to nearest with ties to even, onto `dtype`'s grid."""
    spacing = ulp(hi, dtype)
    return _overflow(torch.round(hi / spacing) * spacing, dtype)


def round_toward_zero(hi: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    spacing = ulp(hi, dtype)
    limit = torch.finfo(dtype).max
    return (torch.trunc(hi / spacing) * spacing).clamp(-limit, limit)


def round_stochastic(hi: torch.Tensor, dtype: torch.dtype, generator: torch.Generator) -> torch.Tensor:
    """Away from zero to the next value with probability equal to the fractional position."""
    spacing = ulp(hi, dtype)
    steps = hi / spacing
    toward_zero = torch.trunc(steps)
    draws = torch.rand(hi.shape, generator=generator, dtype=torch.float64)
    away = draws < (steps - toward_zero).abs()
    return _overflow((toward_zero + torch.sign(steps) * away) * spacing, dtype)


def round_double(hi: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Nearest-even into the wider narrow format first (float16 for bfloat16), then into `dtype`."""
    via = DOUBLE_ROUNDING_VIA.get(dtype)
    first = round_nearest_even(hi, via) if via is not None else hi
    return round_nearest_even(first, dtype)


def _overflow(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    big = values.abs() > torch.finfo(dtype).max
    return torch.where(big, torch.sign(values) * math.inf, values)


# -- statistics ------------------------------------------------------------------------

# Order of the per-leaf sums; `UlpStats` fields in the same order.
_SUMS = ("n", "sum_abs", "sum_signed", "sum_magnitude", "sum_sq", "correct", "inexact", "neighbour",
         "up", "expected_up", "up_variance", "tz_differ", "ne_hits", "tz_hits", "dr_differ", "dr_hits")


@dataclasses.dataclass
class UlpStats:
    """Sufficient statistics of one value's errors in ulps (sums merge by addition)."""

    n: int = 0
    sum_abs: float = 0.0
    sum_signed: float = 0.0
    sum_magnitude: float = 0.0  # error times the sign of the exact value
    sum_sq: float = 0.0
    correct: int = 0
    inexact: int = 0  # elements whose exact value is not representable
    neighbour: int = 0  # inexact elements that landed on one of the two neighbours
    up: int = 0  # ... on the upper (larger magnitude) one
    expected_up: float = 0.0  # sum of fractional positions: stochastic rounding's expected `up`
    up_variance: float = 0.0
    tz_differ: int = 0  # inexact elements where nearest-even and toward-zero disagree
    ne_hits: int = 0
    tz_hits: int = 0
    dr_differ: int = 0  # where double rounding and nearest-even disagree
    dr_hits: int = 0
    max_abs: float = 0.0

    def merge(self, other: "UlpStats") -> "UlpStats":
        sums = {name: getattr(self, name) + getattr(other, name) for name in _SUMS}
        return UlpStats(**sums, max_abs=max(self.max_abs, other.max_abs))

    @property
    def mean_abs(self) -> float:
        return self.sum_abs / self.n if self.n else 0.0

    @property
    def bias(self) -> float:
        return self.sum_signed / self.n if self.n else 0.0

    @property
    def magnitude_bias(self) -> float:
        return self.sum_magnitude / self.n if self.n else 0.0

    def stderr(self, mean: float) -> float:
        """Standard error of a mean error (signed or magnitude: both share the squares)."""
        if self.n < 2:
            return math.inf
        variance = max(self.sum_sq / self.n - mean * mean, 0.0)
        return math.sqrt(variance / (self.n - 1))

    @property
    def share_correct(self) -> float:
        return self.correct / self.n if self.n else 0.0

    def rounding(self) -> str | None:
        """The rounding class, or None when too few elements can tell the rules apart."""
        if self.tz_differ < MIN_EVIDENCE:
            return None
        if self.neighbour < NEIGHBOUR_SHARE * self.inexact:
            return UNKNOWN  # errors beyond one ulp: not a question of rounding
        if self.dr_differ >= MIN_EVIDENCE // 2 and self.dr_hits >= RULE_SHARE * self.dr_differ:
            return DOUBLE_ROUNDING
        if self.ne_hits >= RULE_SHARE * self.tz_differ and self.dr_hits <= self.dr_differ / 2:
            return NEAREST_EVEN
        if self.tz_hits >= RULE_SHARE * self.tz_differ:
            return TOWARD_ZERO
        # "Neither rule" is weak evidence: a merely inaccurate result looks like it on few elements.
        spread = 4.0 * math.sqrt(self.up_variance) + 2.0
        if self.tz_differ >= STOCHASTIC_EVIDENCE and abs(self.up - self.expected_up) <= spread:
            return STOCHASTIC
        return UNKNOWN

    def summary(self) -> dict[str, Any]:
        """The JSON form stored in Result.numerics (rounded for people, not for sums)."""
        return {
            "elements": self.n,
            "max_ulp": _round(self.max_abs), "mean_ulp": _round(self.mean_abs),
            "bias": _round(self.bias), "bias_stderr": _round(self.stderr(self.bias)),
            "magnitude_bias": _round(self.magnitude_bias),
            "magnitude_bias_stderr": _round(self.stderr(self.magnitude_bias)),
            "share_correct": _round(self.share_correct),
            "rounding": self.rounding(),
        }


def _round(value: float) -> float | None:
    return round(value, 4) if math.isfinite(value) else None


def leaf_stats(values: list[torch.Tensor], hi: torch.Tensor, dtype: torch.dtype) -> list[UlpStats]:
    """Statistics of each of `values` (float64 copies of outputs in `dtype`) against `hi`.

    Hot path (every OpInfo sample): a few dozen vectorised ops, one sync per value. Values
    are measured in steps of the oracle's ulp, where nearest-even is `round` (ties to even),
    toward-zero is `trunc` and the neighbours are integers. Elements where any value or the
    oracle is not finite, or the oracle lies beyond `dtype`'s range, are left out.
    """
    hi = hi.to(torch.float64).reshape(-1)
    flat = [v.to(torch.float64).reshape(-1) for v in values]
    keep = hi.isfinite() & (hi.abs() <= torch.finfo(dtype).max)
    for v in flat:
        keep &= v.isfinite()
    if not bool(keep.all()):
        hi, flat = hi[keep], [v[keep] for v in flat]
    if hi.numel() == 0:
        return [UlpStats() for _ in values]
    spacing = ulp(hi, dtype)
    steps = hi / spacing  # exact: division by a power of two
    sign = torch.sign(steps)
    nearest, toward_zero = torch.round(steps), torch.trunc(steps)
    upper = toward_zero + sign
    frac = (steps - toward_zero).abs()
    inexact = frac != 0
    tz_differ = nearest != toward_zero  # implies inexact
    via = DOUBLE_ROUNDING_VIA.get(dtype)
    if via is not None:
        double = torch.round(round_nearest_even(hi, via) / spacing)
        dr_differ = double != nearest
    else:
        double, dr_differ = nearest, torch.zeros_like(inexact)
    shared = torch.stack([inexact, tz_differ, dr_differ]).sum(dim=1).tolist()
    expected_up, up_variance = torch.stack([frac.sum(), (frac * (1 - frac)).sum()]).tolist()
    stats = []
    for v in flat:
        v_steps = v / spacing
        err = v_steps - steps
        is_up = inexact & (v_steps == upper)
        counts = torch.stack([
            v_steps == nearest, inexact & ((v_steps == toward_zero) | is_up), is_up,
            tz_differ & (v_steps == nearest), tz_differ & (v_steps == toward_zero), dr_differ & (v_steps == double),
        ]).sum(dim=1).tolist()
        abs_err = err.abs()
        reals = torch.stack([abs_err.sum(), err.sum(), (err * sign).sum(), (err * err).sum(), abs_err.max()]).tolist()
        correct, neighbour, up, ne_hits, tz_hits, dr_hits = counts
        inexact_n, tz_n, dr_n = shared
        stats.append(UlpStats(
            int(hi.numel()), *reals[:4], correct, inexact_n, neighbour, up, expected_up, up_variance,
            tz_n, ne_hits, tz_hits, dr_n, dr_hits, max_abs=reals[4],
        ))
    return stats


# -- the bias rule -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BiasRule:
    """When a lean of the device's errors is a MISMATCH (DESIGN.md, rule 5).

    Only where the CPU itself rounds (nearly) correctly: then the exact result is what both
    should round, and a mean error away from 0 is the device's doing. Reductions whose CPU
    result is itself several ulps off (accumulation order) are left to the error-ratio rule.
    float32's threshold is a whole ulp: libm-grade functions (1-2 ulp) may lean legitimately.
    """

    threshold_ulp: float = 0.25
    min_z: float = 6.0
    min_elements: int = 16  # with z > 6 a chance lean is out of reach even here; OpInfo samples are small
    cpu_share_correct: float = 0.75
    cpu_fraction: float = 0.25  # the CPU's |bias| at most this share of the device's


BIAS_RULES: dict[torch.dtype, BiasRule] = {torch.float32: BiasRule(threshold_ulp=1.0)}
DEFAULT_BIAS_RULE = BiasRule()


@dataclasses.dataclass
class Numerics:
    """Device and CPU statistics of one result (any number of samples and output leaves)."""

    dtype: str
    device: UlpStats
    cpu: UlpStats

    @classmethod
    def of(cls, dev: torch.Tensor, ref: torch.Tensor | None, hi: torch.Tensor, dtype: torch.dtype) -> "Numerics":
        """`ref=None`: the device's values are the CPU's (bit for bit); measured once."""
        if ref is None:
            (stats,) = leaf_stats([dev], hi, dtype)
            return cls(str(dtype).removeprefix("torch."), stats, stats)
        dev_stats, cpu_stats = leaf_stats([dev, ref], hi, dtype)
        return cls(str(dtype).removeprefix("torch."), dev_stats, cpu_stats)

    def merge(self, other: "Numerics | None") -> "Numerics":
        if other is None:
            return self
        return Numerics(self.dtype, self.device.merge(other.device), self.cpu.merge(other.cpu))

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, **self.device.summary(), "cpu": self.cpu.summary()}

    def rounding_observable(self) -> bool:
        """The CPU rounds the exact result to nearest-even: the op's rounding can be judged."""
        return self.cpu.rounding() == NEAREST_EVEN

    def verdict(self, expect_rounding: str | None = None) -> str | None:
        """Why the statistics make this result a MISMATCH, or None.

        Where the CPU rounds to nearest-even, the device's rounding is judged too: it must be
        `expect_rounding` when given, else not toward-zero nor double rounding (stochastic
        rounding is unbiased and allowed).
        """
        rounding = self.device.rounding()
        judged = rounding is not None and self.rounding_observable()
        if expect_rounding is not None and judged:
            if rounding == expect_rounding:
                return None  # the expected rule explains any lean it has
            return (f"rounding looks like {ROUNDING_WORDS[rounding]}, not the expected {expect_rounding} "
                    f"({self.device.tz_differ:,} deciding elements of {self.device.n:,})")
        reason = self.bias_reason()
        if reason or not judged or rounding not in FAULTY_ROUNDING:
            return reason
        return (f"rounding looks like {ROUNDING_WORDS[rounding]} where the CPU rounds to nearest even "
                f"({self.device.tz_differ:,} deciding elements of {self.device.n:,})")

    def leans(self) -> bool:
        """Does the device's mean error reach the bias threshold at all (before the tests of
        significance and of the CPU's own lean)? A mean over samples is within theirs, so a
        sample that does not lean cannot make its item lean."""
        rule = BIAS_RULES.get(getattr(torch, self.dtype, None), DEFAULT_BIAS_RULE)
        return max(abs(self.device.bias), abs(self.device.magnitude_bias)) > rule.threshold_ulp

    def bias_reason(self) -> str | None:
        rule = BIAS_RULES.get(getattr(torch, self.dtype, None), DEFAULT_BIAS_RULE)
        dev, cpu = self.device, self.cpu
        if dev.n < rule.min_elements or cpu.share_correct < rule.cpu_share_correct:
            return None
        leans = [(dev.bias, cpu.bias, ""), (dev.magnitude_bias, cpu.magnitude_bias, " in magnitude")]
        found = [(d, c, words) for d, c, words in leans
                 if abs(d) > rule.threshold_ulp and abs(d) > rule.min_z * dev.stderr(d)
                 and abs(c) <= rule.cpu_fraction * abs(d)]
        if not found:
            return None
        bias, cpu_bias, words = max(found, key=lambda lean: abs(lean[0]))
        if words:
            words = " toward zero" if bias < 0 else " away from zero"
        reason = f"systematic bias {bias:+.2f} ulp{words} over {dev.n:,} elements (CPU {cpu_bias:+.2f})"
        rounding = dev.rounding()
        if rounding not in (None, NEAREST_EVEN, UNKNOWN):
            reason += f"; rounding looks like {ROUNDING_WORDS[rounding]}"
        return reason


def merge_numerics(a: Numerics | None, b: Numerics | None) -> Numerics | None:
    return b if a is None else a.merge(b)


OracleLeaf = tuple  # (values: a flat output, hi: its flat float64 oracle, dtype)


def measurable(out: Any) -> bool:
    """Does `out` hold a leaf these statistics measure? (else its oracle would be wasted work)"""
    leaves = (out,) if isinstance(out, torch.Tensor) else pytree.tree_leaves(out)
    return any(isinstance(t, torch.Tensor) and t.numel() and t.layout == torch.strided
               and t.dtype.to_real() in rounding_dtypes() for t in leaves)


def oracle_leaves(ref: Any, hi: Any) -> list[OracleLeaf]:
    """The measurable leaves of an output the device reproduced bit for bit, to be measured
    later in one go (`numerics_of_leaves`): the statistics are the CPU's for both."""
    leaves = []
    for r, h in zip(pytree.tree_leaves(ref), pytree.tree_leaves(hi)):
        if isinstance(r, torch.Tensor) and r.is_complex() and isinstance(h, torch.Tensor) and h.is_complex():
            r, h = torch.view_as_real(r.resolve_conj()), torch.view_as_real(h.resolve_conj())  # as compare does
        if isinstance(r, torch.Tensor) and isinstance(h, torch.Tensor) and r.shape == h.shape \
                and r.layout == torch.strided and r.dtype in rounding_dtypes() and r.numel():
            leaves.append((r.detach().reshape(-1), h.detach().reshape(-1), r.dtype))  # widened once, pooled
    return leaves


def numerics_of_leaves(leaves: list[OracleLeaf]) -> Numerics | None:
    """Statistics of many bit-identical outputs, one vectorised pass per dtype."""
    total = None
    for dtype in dict.fromkeys(leaf[2] for leaf in leaves):
        values = torch.cat([v for v, _, d in leaves if d == dtype]).double()
        hi = torch.cat([h.double() for _, h, d in leaves if d == dtype])
        total = merge_numerics(total, Numerics.of(values, None, hi, dtype))
    return total
