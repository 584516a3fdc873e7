"""Inputs of the FP8 suite: every FP8 code, and the source values whose rounding matters.

A conversion to FP8 can only go wrong near a decision: at a rounding boundary (the
midpoint between two adjacent FP8 values, where ties go to the even code), at the
edges of the subnormal range, at the largest finite value (saturate, NaN or Inf?),
and at the special values (NaN, Inf, signed zero). `boundary_grid` lists exactly
those points and their nearest neighbours in the source dtype; the dense grids add
every bfloat16/float16 value, and for float32 every value whose low 16 bits are one
of a few sticky-bit patterns, so the rounding of any bit above them is exercised.
"""

from __future__ import annotations

import torch

from conformance.numerics import bit_width, bits

FP8_NAMES = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
# The formats a backend must have to be called FP8-ready; the fnuz ones (AMD's) are
# tested only where the backend claims them.
PRIMARY_FP8 = ("float8_e4m3fn", "float8_e5m2")
WIDE_NAMES = ("float32", "bfloat16", "float16")

# Low halves of a float32 combined with every high half in the dense float32 grid:
# exact, lowest sticky bit, everything but the top bit, the top bit alone, all ones.
_LOW_HALVES = (0x0000, 0x0001, 0x7FFF, 0x8000, 0xFFFF)


def fp8_dtype(name: str) -> torch.dtype | None:
    """torch.float8_e4m3fn for 'float8_e4m3fn'; None when this torch lacks it."""
    return getattr(torch, name, None) if name in FP8_NAMES else None


def all_codes(dtype: torch.dtype) -> torch.Tensor:
    """The 256 codes of an FP8 format, code i at index i."""
    return torch.arange(256, dtype=torch.uint8).view(dtype)


def finite_magnitudes(dtype: torch.dtype) -> torch.Tensor:
    """The non-negative finite values of an FP8 format, ascending, in float64."""
    values = all_codes(dtype).to(torch.float64)
    values = values[values.isfinite() & (values >= 0)]
    return torch.unique(values)


def boundary_grid(fp8: torch.dtype, source: torch.dtype) -> torch.Tensor:
    """Every FP8 value, every rounding boundary, the overflow edge, source-dtype
    subnormals and specials, each with its neighbours in `source`; both signs."""
    values = finite_magnitudes(fp8)
    top_step = values[-1] - values[-2]
    points = torch.cat([
        values,
        (values[:-1] + values[1:]) / 2,  # ties; exact in every wide dtype
        values[-1:] + top_step / 2,  # where round-to-nearest would leave the finite range
        values[-1:] + top_step,
        values[-1:] * 2,
    ])
    info = torch.finfo(source)
    source_edges = torch.tensor([info.tiny, info.smallest_normal / 2, info.max], dtype=torch.float64)
    wide = torch.cat([points, source_edges]).to(source)
    smallest_subnormal = torch.ones(1, dtype=bits(wide).dtype).view(source)
    wide = torch.cat([wide, smallest_subnormal])
    wide = torch.cat([wide, _neighbours(wide)])
    wide = wide[wide.isfinite()]
    wide = wide.view(bits(wide).dtype).unique().view(source)  # ascending by bit pattern
    specials = torch.tensor([float("inf"), float("nan")], dtype=source)
    positive = torch.cat([wide, specials])
    return torch.cat([positive, -positive])


def _neighbours(t: torch.Tensor) -> torch.Tensor:
    """The next value above and below each non-negative value (one bit-pattern step)."""
    b = bits(t)
    up = (b + 1).view(t.dtype)
    down = (b[b > 0] - 1).view(t.dtype)
    return torch.cat([up, down])


def every_value(dtype: torch.dtype) -> torch.Tensor:
    """Every bit pattern of a 16-bit float dtype (NaNs included), ascending by pattern."""
    return torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(dtype)


def dense_float32_grid() -> torch.Tensor:
    """Every float32 high half with each of `_LOW_HALVES` below it (327,680 values)."""
    high = torch.arange(1 << 16, dtype=torch.int64) << 16
    low = torch.tensor(_LOW_HALVES, dtype=torch.int64)
    patterns = (high[:, None] | low[None, :]).reshape(-1)
    patterns = torch.where(patterns >= 1 << 31, patterns - (1 << 32), patterns)
    return patterns.to(torch.int32).view(torch.float32)


def conversion_inputs(fp8: torch.dtype, source: torch.dtype) -> list[tuple[str, torch.Tensor]]:
    """Labelled input sets for `source` -> `fp8`: the boundary grid first, then a dense grid."""
    dense = every_value(source) if bit_width(source) == 16 else dense_float32_grid()
    dense_label = "every value" if bit_width(source) == 16 else "dense bit grid"
    return [("boundary grid", boundary_grid(fp8, source)), (dense_label, dense)]
