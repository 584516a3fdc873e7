"""What do the ulp statistics (rule 5) cost? CPU time of fault-free OpInfo items on sim, one process.

    python benchmarks/oracle_cost.py                       the default op list, fp32,bf16,fp16, 3 rounds
    python benchmarks/oracle_cost.py --dtype bf16 --rounds 5 --ops add,mul,sum,eq

The same items run under three oracle policies, interleaved round by round so the machine's
load falls on all alike; printed is each policy's process CPU time and its ratio to `lazy`:

    lazy        the float64 oracle only when the plain check fails (no statistics for a PASS)
    shipped     up front where the output holds a floating tensor the statistics measure
                (`conformance.numerics.ulp.measurable`), and for bit-identical samples only until the item
                has `steps.IDENTICAL_ELEMENTS_MEASURED` of their elements; lazily elsewhere
    every       up front on every deterministic sample, whatever its output, uncapped

Target: `shipped` within 1.3x of `lazy` CPU time on the default list (which mixes
floating, integer and boolean outputs as an OpInfo sweep does).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

OPS = ("add,sub,mul,div.no_rounding_mode,exp,log,sin,tanh,sigmoid,sqrt,pow,abs,floor,clamp,where,eq,lt,isnan,"
       "argmax,sum,mean,amax,cumsum,var,matmul,bmm,addmm,softmax,nn.functional.gelu,nn.functional.layer_norm,"
       "cat,reshape,index_select,gather,sort,topk")
ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@contextlib.contextmanager
def policy(name: str):
    from conformance.numerics import ulp
    from conformance.opinfo import steps

    measurable, cap = ulp.measurable, steps.IDENTICAL_ELEMENTS_MEASURED
    ulp.measurable = {"lazy": lambda out: False, "shipped": measurable, "every": lambda out: True}[name]
    steps.IDENTICAL_ELEMENTS_MEASURED = 1 << 62 if name == "every" else cap
    try:
        yield
    finally:
        ulp.measurable, steps.IDENTICAL_ELEMENTS_MEASURED = measurable, cap


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="fp32,bf16,fp16")
    parser.add_argument("--ops", default=OPS)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)  # process CPU time without intra-op threads spinning on a shared machine

    from conformance.engine.config import RunConfig
    from conformance.engine.worker import init_worker, run_one
    from op_db.records import WorkItem

    ctx = init_worker(RunConfig(backend="sim", device="sim"))
    items = [WorkItem("opinfo", op.strip(), "forward", ALIASES.get(d.strip(), d.strip()), "eager")
             for d in args.dtype.split(",") for op in args.ops.split(",")]
    for item in items:  # warm-up: imports, sample caches, the first dispatch of every op
        run_one(item, ctx)
    names = ("lazy", "shipped", "every")
    cpu = dict.fromkeys(names, 0.0)
    for _ in range(args.rounds):
        for name in names:
            with policy(name):
                started = time.process_time()
                for item in items:
                    run_one(item, ctx)
                cpu[name] += time.process_time() - started
    print(f"{len(items)} items x {args.rounds} rounds, CPU seconds per policy:")
    for name in names:
        print(f"  {name:11s} {cpu[name]:7.2f} s   {cpu[name] / cpu['lazy']:.2f}x lazy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
