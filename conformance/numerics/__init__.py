"""The one comparison rule every suite uses (DESIGN.md, "The numerics rule"), and every judge
built on it, each returning one `Comparison` that conformance/outcome.py turns into a Status:

    rule.py   compare(dev, ref, hi): structure, assert_close tolerances, the float64 oracle
    ulp.py    ulp statistics against the oracle and the bias rule (rule 5)
    fp8.py    FP8: bit-exact conversions, FP8 steps, the _scaled_mm error bound (rule 4)
"""

from conformance.numerics.fp8 import (
    FP32_UNIT_ROUNDOFF,
    bit_width,
    bits,
    compare_bits,
    compare_fp8_steps,
    compare_scaled_mm,
    describe_value,
    first_bit_difference,
    fp8_ulp_distance,
    scaled_mm_bound,
)
from conformance.numerics.comparison import Comparison
from conformance.numerics.rule import (
    DEFAULT_TOLERANCES,
    FP8_DTYPES,
    HALF_DTYPES,
    SMALL_NUMEL,
    atol_floor,
    compare,
    compare_leaf,
    multiplier,
    tolerances,
)

__all__ = [
    "DEFAULT_TOLERANCES", "FP8_DTYPES", "FP32_UNIT_ROUNDOFF", "HALF_DTYPES", "SMALL_NUMEL", "Comparison",
    "atol_floor", "bit_width", "bits", "compare", "compare_bits", "compare_fp8_steps", "compare_leaf",
    "compare_scaled_mm", "describe_value", "first_bit_difference", "fp8_ulp_distance", "multiplier",
    "scaled_mm_bound", "tolerances",
]
