"""The one outcome of every judge: `Comparison`, with the error measures the judges share."""

from __future__ import annotations

import dataclasses
import math

import torch

from conformance.numerics import ulp


@dataclasses.dataclass
class Comparison:
    """Outcome of comparing one output (possibly a tuple of tensors)."""

    ok: bool
    rule: str  # "exact", "allclose", "oracle", "composite", "bias", "structure", "nonfinite", FP8: "fp8-steps", "error-bound"
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
    # A passing result's caveat a reader should see ("less accurate than the CPU kernel: ...",
    # "the CPU overflowed ..."); conformance/outcome.py makes it the Result's message.
    note: str = ""

    @property
    def samples_passed(self) -> int:
        return self.passed if self.passed is not None else (self.samples if self.ok else 0)

    def merge(self, other: "Comparison") -> "Comparison":
        """Worst-of two comparisons (the leaves of one output, or the samples of one item):
        failures win, errors take the maximum. Counts are the caller's to set."""
        if other._is_exact_pass() and self._absorbs_exact_pass():
            return self  # what the full merge below would build, field for field
        first_fail = self if not self.ok else other
        return Comparison(
            ok=self.ok and other.ok,
            rule=first_fail.rule if not (self.ok and other.ok) else _stronger(self.rule, other.rule),
            reason=first_fail.reason if not first_fail.ok else "",
            max_abs_err=larger(self.max_abs_err, other.max_abs_err),
            max_rel_err=larger(self.max_rel_err, other.max_rel_err),
            err_ratio=larger(self.err_ratio, other.err_ratio),
            leaf=first_fail.leaf if not first_fail.ok else None,
            where=first_fail.where if not first_fail.ok else "",
            bound_ratio=larger(self.bound_ratio, other.bound_ratio),
            numerics=ulp.merge_numerics(self.numerics, other.numerics),
            note=_merge_notes(self.note, other.note),
        )

    def _is_exact_pass(self) -> bool:
        """A pass with nothing to add to a merge but its 0.0 errors (the bit-identical sample)."""
        return (self.ok and self.rule == "exact" and self.max_abs_err == 0.0 and self.max_rel_err == 0.0
                and self.err_ratio is None and self.bound_ratio is None and self.numerics is None and not self.note)

    def _absorbs_exact_pass(self) -> bool:
        """Would merging an exact pass into this comparison give an equal one? Most OpInfo samples
        on a correct backend are bit-identical to the CPU's, so an item's running total meets
        that pass thousands of times a sweep; building the same comparison again each time was
        a measurable share of the sweep's harness time."""
        errors = (self.max_abs_err, self.max_rel_err)
        if any(e is None or e < 0.0 for e in errors) or self.note or self.samples != 1 or self.passed is not None:
            return False
        if not self.ok:
            return True  # the failure stands whole; its errors are at least the pass's 0.0
        return (not self.reason and self.leaf is None and not self.where
                and _RULE_STRENGTH.index(self.rule) >= _RULE_STRENGTH.index("exact"))


def _merge_notes(a: str, b: str) -> str:
    """Each kind of note once: samples repeat a note with their own figures, so a part of the
    same kind (same opening words) as one already kept is dropped."""
    parts = [p for p in a.split("; ") if p] if a else []
    for part in b.split("; ") if b else []:
        if part and not any(kept[:24] == part[:24] for kept in parts):
            parts.append(part)
    return "; ".join(parts)


def larger(a: float | None, b: float | None) -> float | None:
    values = [v for v in (a, b) if v is not None]
    return max(values) if values else None


_RULE_STRENGTH = ("structure", "nonfinite", "exact", "allclose", "oracle", "composite", "bias", "fp8-steps", "error-bound")


def _stronger(a: str, b: str) -> str:
    return max(a, b, key=_RULE_STRENGTH.index)


def rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.numel() == 0:
        return 0.0
    return float(((a - b) ** 2).mean().sqrt())


def max_errors(dev: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
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


def error_ratio(dev: torch.Tensor, ref: torch.Tensor, hi: torch.Tensor) -> float | None:
    dev_err, ref_err = rmse(dev, hi), rmse(ref, hi)
    if ref_err == 0.0:
        return 1.0 if dev_err == 0.0 else None
    ratio = dev_err / ref_err
    return ratio if math.isfinite(ratio) else None
