"""What the float64 oracle decides on its own (DESIGN.md, "The numerics rule", rule 6).

* Overflow. Where the device and the CPU disagree on an Inf (or NaN), the oracle says which
  is right: where its value rounded into the dtype is that Inf, the Inf is right; where it is
  finite, a finite device value is right (judged by the rule like any other) and it is the
  CPU that overflowed. `settle_nonfinite` rewrites the CPU's value at the places the oracle
  settles to the oracle's own rounding into the dtype, and says so in a note.
* No CPU kernel. Where the CPU has no kernel in the item's dtype but the float64 oracle
  runs, `rounded_oracle` stands in for the CPU's result: the oracle rounded to nearest even
  into the dtype, the best any implementation in that dtype can return. The rule then holds
  the device to the dtype's own bound.
"""

from __future__ import annotations

import torch

from conformance.numerics import ulp


def rounded_oracle(hi: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`hi` (float64 or complex128) rounded to nearest even into `dtype`, overflowing to Inf."""
    if hi.is_complex():
        real = torch.view_as_real(hi.detach().to(torch.complex128))
        return torch.view_as_complex(_round_real(real, dtype.to_real()).contiguous()).to(dtype)
    return _round_real(hi.detach().double(), dtype).to(dtype)


def _round_real(hi: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.float64:
        return hi
    if dtype not in ulp.rounding_dtypes():
        return hi.to(dtype)
    finite = hi.isfinite()
    rounded = ulp.round_nearest_even(torch.where(finite, hi, torch.zeros_like(hi)), dtype)
    return torch.where(finite, rounded, hi)


def settle_nonfinite(dev64: torch.Tensor, ref64: torch.Tensor, hi: torch.Tensor,
                     dtype: torch.dtype) -> tuple[torch.Tensor, str]:
    """The CPU's values (float64) with the places the oracle settles in the device's favour
    replaced by the oracle's rounding into `dtype`, and a note saying what was settled
    ("" when nothing was). Places the oracle does not settle are left for the rule to fail."""
    same = (dev64 == ref64) | (dev64.isnan() & ref64.isnan())
    disputed = ~same & ~(dev64.isfinite() & ref64.isfinite())
    if not bool(disputed.any()):
        return ref64, ""
    rounded = _round_real(hi.detach().double(), dtype)
    device_inf_right = disputed & dev64.isinf() & (rounded == dev64)
    device_finite_right = disputed & dev64.isfinite() & rounded.isfinite()
    settled = device_inf_right | device_finite_right
    if not bool(settled.any()):
        return ref64, ""
    notes = []
    if bool(device_finite_right.any()):
        notes.append(_note(device_finite_right, ref64, hi, dev64,
                           f"the CPU overflowed where the float64 oracle is within {_name(dtype)}'s range"))
    if bool(device_inf_right.any()):
        notes.append(_note(device_inf_right, ref64, hi, dev64,
                           f"the float64 oracle overflows {_name(dtype)} where the CPU's value is finite: Inf is right"))
    return torch.where(settled, rounded, ref64), "; ".join(notes)


def _note(mask: torch.Tensor, ref64: torch.Tensor, hi: torch.Tensor, dev64: torch.Tensor, words: str) -> str:
    flat = int(mask.reshape(-1).nonzero()[0, 0])
    where = flat if mask.dim() <= 1 else tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), mask.shape))
    pick = lambda t: float(t.reshape(-1)[flat])  # noqa: E731
    return (f"{words} ({int(mask.sum())} element(s), first at index {where}: device {pick(dev64):.6g}, "
            f"CPU {pick(ref64):.6g}, oracle {pick(hi.double()):.6g})")


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
