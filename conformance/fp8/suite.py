"""The FP8 suite: conversions, FP8 arithmetic and FP8 data movement on the device vs CPU.

Work items are ("fp8", subject, variant, dtype, mode), dtype one of float8_e4m3fn,
float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz:

    subject    variants                                       judged
    cast       from_float32 from_bfloat16 from_float16        bit-exact (a NaN matches any NaN)
               to_float32 to_bfloat16 to_float16              bit-exact (all 256 codes decoded)
    scaled_mm  per_tensor rowwise                             error bound below
    movement   copy view cat index_select transpose           bit-exact, NaN payloads included
    opinfo     the OpInfo full name (eye, torch._scaled_mm,   FP8 outputs: bit-exact, or within
               torch._scaled_mm_v2 in torch 2.13)             1 FP8 step for scaled_mm; others:
                                                              the numerics rule

`cast from_*` converts, for the boundary grid and a dense grid (conformance/fp8_inputs.py):
every FP8 value, every midpoint between adjacent values (ties to even) and the
neighbours of each in the source dtype, subnormals of both formats, the largest
finite value and the overflow edge above it (e4m3fn has no infinity: whatever the
CPU does there, saturate or NaN, the device must do bit for bit), +-Inf, NaN, +-0;
then every bfloat16/float16 value, or 327,680 float32 values covering every
rounding bit. A mismatch names the first differing input and both bit patterns:
"input 0x43e00000 (448.0): device 0x7f (nan), CPU 0x7e (448.0)".

The `_scaled_mm` error bound. The output is out = fl_out(s_a s_b sum_k a_ik b_kj)
with FP8 a, b and float32 scales, out_dtype bfloat16. Products of two FP8 values
are exact in float32; a float32 accumulation of K terms in any order errs by at
most (K-1) u S, S = |s_a s_b| sum_k |a_ik||b_kj| (u = 2^-24); applying the two
scales adds at most 2 u relative; rounding to out_dtype adds u_out = eps(out)/2.
So against the float64 product of the dequantised inputs (itself exact to
~K 2^-53 S, negligible):

    |out - exact| <= u_out |exact| + (K + 2) u (1 + u_out) S + eps(out) tiny(out)

(the last term: one subnormal step). It holds for every summation order and
blocking, and for a kernel that rounds a float32 result to out_dtype once. A
kernel that accumulates in less than float32 (some "fast accumulation" modes)
fails it, as it should. `err_ratio` is rmse(device - exact) / rmse(CPU - exact);
`extra["bound_ratio"]` is the largest |out - exact| / bound (<= 1 passes).

UNSUPPORTED, not ERROR, when the backend lacks FP8: the adapter says the dtype is
unsupported, or a tiny conversion on the device raises what
conformance.outcome.classify_exception calls UNSUPPORTED. The fnuz formats are
tested only where the backend claims them; elsewhere their items are SKIP.
Autograd does not apply to FP8 data, so `plan(grad=True)` adds no items.

Every case first moves its inputs to the device and back; if that alone changes a
bit, the item fails with failing_op aten._to_copy.default ("transfer of input 0,
element 1"), so a broken transfer is not blamed on the op under test. OpInfo
samples that mix FP8 formats (e4m3fn x e5m2 _scaled_mm) are left out of both
formats' items, since a failure could not be put down to one format.
"""

from __future__ import annotations

from conformance.planning import OpsOptions
from conformance.suite import ModuleSuite

# `neuron-check ops --dtype fp8` plans it.
SUITE = ModuleSuite(name="fp8", command="ops", options_type=OpsOptions, default_timeout_s=120.0,
                    planner="conformance.fp8.plan:plan_ops", runner="conformance.fp8.run")
