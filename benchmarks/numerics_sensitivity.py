"""How small a numerical fault does the suite catch, and does it ever cry wolf?

    python benchmarks/numerics_sensitivity.py                  everything (several minutes)
    python benchmarks/numerics_sensitivity.py --no-compile     skip the Inductor false-alarm sweep
    python benchmarks/numerics_sensitivity.py --dtype bf16 --ops add,mul

For each dtype (fp32, bf16, fp16) and op (add, mul, exp, matmul, sum, softmax, layer_norm)
the OpInfo item runs on the sim device with a `scale` fault on the aten ops producing the
result, for an ascending ladder of scales; printed is the smallest scale that makes the item a
MISMATCH, with the numerics rule as shipped and without rule 5 (the ulp bias/rounding rule,
switched off in this process only) for comparison. FP8 (e4m3fn, e5m2) has no OpInfo samples
on the CPU: its row applies the numerics rule directly to FP8 results of the same ops on
random FP8 inputs (CPU = nearest-even of the exact result, device = nearest-even of the scaled
exact result). Then `truncate` on every element-wise op of TRUNCATION_OPS in bf16 and fp16,
and the false alarms: MISMATCH on fault-free sim over all those ops, and MISMATCH from rule 5
with `--device cpu --mode compile` (Inductor against eager CPU) over OPS.
Targets: a bf16 bias of 0.5% caught on element-wise ops; truncation caught on every
element-wise op whose results are not all exact; 0 false alarms.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

OPS = {  # OpInfo name -> the aten overloads that produce its result
    "add": ["aten.add.Tensor"], "mul": ["aten.mul.Tensor"], "exp": ["aten.exp.default"],
    "matmul": ["aten.mm.default", "aten.bmm.default", "aten.mv.default", "aten.dot.default"],
    "sum": ["aten.sum.default", "aten.sum.dim_IntList"], "softmax": ["aten._softmax.default"],
    "nn.functional.layer_norm": ["aten.native_layer_norm.default"],
}
SCALES = {
    "float32": [1 + 3e-8, 1 + 1e-7, 1 + 3e-7, 1 + 1e-6, 1 + 1e-5, 1 + 1e-4, 1 + 1e-3],
    "float16": [1.00005, 1.0001, 1.0002, 1.0005, 1.001, 1.002, 1.005, 1.01, 1.02, 1.05, 1.1],
    "bfloat16": [1.0005, 1.001, 1.002, 1.005, 1.01, 1.02, 1.05, 1.1, 1.2],
}
FP8_SCALES = [1.001, 1.002, 1.005, 1.01, 1.02, 1.05, 1.1, 1.2]
TRUNCATION_OPS = ["add", "sub", "mul", "div.no_rounding_mode", "exp", "log", "sin", "cos", "tanh", "sigmoid",
                  "sqrt", "rsqrt", "reciprocal", "pow", "nn.functional.gelu", "nn.functional.silu", "lerp",
                  "addcmul", "addcdiv", "hypot", "atan2", "erf", "log1p", "expm1"]
COMPILE_SAMPLES = 6
ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "e4m3fn": "float8_e4m3fn", "e5m2": "float8_e5m2"}


@contextlib.contextmanager
def without_rule_5():
    from conformance.numerics import ulp

    original = ulp.Numerics.verdict
    ulp.Numerics.verdict = lambda self, expect_rounding=None: None
    try:
        yield
    finally:
        ulp.Numerics.verdict = original


def run_item(ctx, op: str, dtype: str, faults: list[dict], mode: str = "eager"):
    import conformance.sim as sim
    from conformance.engine.worker import run_one
    from op_db.records import WorkItem

    sim.set_profile(sim.load_profile({"name": "bench", "faults": faults}) if faults else None)
    try:
        return run_one(WorkItem("opinfo", op, "forward", dtype, mode), ctx)
    finally:
        sim.set_profile(None)


def smallest_caught(ctx, op: str, dtype: str) -> float | None:
    from op_db.records import Status

    for scale in SCALES[dtype]:
        faults = [{"op": name, "kind": "scale", "value": scale} for name in OPS[op]]
        if run_item(ctx, op, dtype, faults).status is Status.MISMATCH:
            return scale
    return None


def fp8_smallest_caught(op: str, dtype_name: str) -> float | None:
    import torch

    from conformance.numerics import ulp
    from conformance.numerics import compare

    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randn(16, 64, generator=gen).to(dtype).double() for _ in range(2))
    exact = {
        "add": lambda: a + b, "mul": lambda: a * b, "exp": lambda: a.clamp_max(5).exp(), "matmul": lambda: a @ b.T / 8,
        "sum": lambda: a.sum(dim=1) / 8, "softmax": lambda: a.softmax(dim=1),
        "nn.functional.layer_norm": lambda: torch.nn.functional.layer_norm(a, (64,)),
    }[op]()
    ref = ulp.round_nearest_even(exact, dtype).to(dtype)
    for scale in FP8_SCALES:
        dev = ulp.round_nearest_even(exact * scale, dtype).to(dtype)
        if not compare(dev, ref, exact).ok:
            return scale
    return None


def fmt_scale(scale: float | None) -> str:
    if scale is None:
        return "not caught"
    return f"{scale:.8g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="fp32,bf16,fp16,e4m3fn,e5m2")
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--no-compile", action="store_true", help="skip the Inductor false-alarm sweep")
    args = parser.parse_args()
    dtypes = [ALIASES.get(d.strip(), d.strip()) for d in args.dtype.split(",")]
    ops = [o.strip() for o in args.ops.split(",")]

    from conformance.engine.config import RunConfig
    from conformance.engine.worker import init_worker
    from conformance.planning import OpsOptions
    from op_db.records import Status

    started = time.perf_counter()
    ctx = init_worker(RunConfig(backend="sim", device="sim"))
    print("smallest scale fault caught (bias added to every result):")
    print(f"{'dtype':14s} " + " ".join(f"{o.removeprefix('nn.functional.'):>12s}" for o in ops))
    for dtype in dtypes:
        if dtype.startswith("float8"):
            row = [fmt_scale(fp8_smallest_caught(op, dtype)) for op in ops]
            print(f"{dtype:14s} " + " ".join(f"{c:>12s}" for c in row) + "   (rule applied directly; FP8 is bit-exact)")
            continue
        row = [fmt_scale(smallest_caught(ctx, op, dtype)) for op in ops]
        with without_rule_5():
            before = [fmt_scale(smallest_caught(ctx, op, dtype)) for op in ops]
        print(f"{dtype:14s} " + " ".join(f"{c:>12s}" for c in row))
        print(f"{'  w/o rule 5':14s} " + " ".join(f"{c:>12s}" for c in before))

    print("\ntruncate (round toward zero) on element-wise ops:")
    for dtype in (d for d in dtypes if d in ("bfloat16", "float16")):
        caught, missed = [], []
        for op in TRUNCATION_OPS:
            result = run_item(ctx, op, dtype, [{"op": "aten.*", "kind": "truncate"}])
            (caught if result.status is Status.MISMATCH else missed).append(f"{op}({result.status.value})")
        print(f"{dtype}: caught {len(caught)}/{len(TRUNCATION_OPS)}; missed: {', '.join(missed) or 'none'}")

    print("\nfalse alarms:")
    plain = [d for d in dtypes if not d.startswith("float8")]
    sim_alarms = [f"{op}/{d}" for d in plain for op in ops + TRUNCATION_OPS
                  if run_item(ctx, op, d, []).status is Status.MISMATCH]
    print(f"fault-free sim, {len(plain) * len(ops + TRUNCATION_OPS)} items: {len(sim_alarms)} MISMATCH {sim_alarms}")
    if not args.no_compile:
        # Every sample shape compiles afresh: a few samples per item keep this to minutes.
        cctx = init_worker(RunConfig(backend="cpu", device="cpu", suite_options=OpsOptions(max_samples=COMPILE_SAMPLES)))
        alarms, other = [], []
        for d in plain:
            for op in ops:
                result = run_item(cctx, op, d, [], mode="compile")
                if result.status is Status.MISMATCH:
                    rule5 = result.message and ("systematic bias" in result.message or "rounding looks like" in result.message)
                    (alarms if rule5 else other).append(f"{op}/{d}: {result.message[:80]}")
        print(f"cpu compile (Inductor, <= {COMPILE_SAMPLES} samples per item), {len(plain) * len(ops)} items: {len(alarms)} MISMATCH from rule 5 {alarms}")
        print(f"  MISMATCH from the other rules (not rule 5's doing): {len(other)} {other}")
    print(f"\nwall {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
