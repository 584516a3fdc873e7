"""Model suite sweep: every causal-LM type x fp32,bf16,fp16 forward on sim (target: <= 10 minutes).

    python benchmarks/models_sweep.py [--task causal-lm] [--dtype fp32,bf16,fp16] [--jobs 2] [--db sweep.db]
    python benchmarks/models_sweep.py --task all --one-task-per-type --grad --dtype fp32,bf16   every architecture once

Runs through the engine like `neuron-check models` (worker processes, a store),
then prints wall time, items per second, counts per status, counts per
(task, status), the ops that block the most model types and the slowest items.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="causal-lm", help="comma list, or 'all' for every derived task")
    parser.add_argument("--every", type=int, default=1, help="sample every Nth item; the full time is extrapolated")
    parser.add_argument("--one-task-per-type", action="store_true",
                        help="only each model type's primary task (every architecture once, not every head)")
    parser.add_argument("--grad", action="store_true", help="also the backward items (loss.backward(), every gradient)")
    parser.add_argument("--arch", default=None)
    parser.add_argument("--dtype", default="fp32,bf16,fp16")
    parser.add_argument("--device", default="sim")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--db", default=None, help="keep the results here (default: a temporary file)")
    args = parser.parse_args()

    from conformance import backends
    from conformance.engine.config import RunConfig
    from conformance.engine.local import run_items, start_run
    from conformance.models.plan import ModelOptions, plan
    from op_db.store import Store

    options = ModelOptions(archs=tuple(args.arch.split(",")) if args.arch else (), tasks=() if args.task == "all" else tuple(args.task.split(",")),
                           dtypes=tuple(args.dtype.split(",")), grad=args.grad)
    planned = plan(options)
    if args.one_task_per_type:
        from conformance.models import zoo

        primary = {entry.subject for entry in zoo.catalogue().values()}
        planned = [item for item in planned if item.subject in primary]
    items = planned[::args.every]
    adapter, device = backends.resolve(args.device)
    adapter.init()
    db = args.db or os.path.join(tempfile.mkdtemp(prefix="models-sweep-"), "sweep.db")
    config = RunConfig(backend=adapter.name, device=device, jobs=args.jobs, timeout_s=args.timeout,
                       suite_options=options)
    with Store.open(db) as store:
        run_id = start_run(store, config, adapter, {"suite": "model", "benchmark": "models_sweep"})
        start = time.perf_counter()
        summary = run_items(items, config, store, run_id, progress=True)
        wall = time.perf_counter() - start
        results = store.results(run_id)
    types = {r.subject for r in results}
    print(f"{len(results)} items ({len(types)} (type, task) subjects x {args.dtype}) on {device} with {args.jobs} job(s): "
          f"{wall:.1f} s wall, {len(results) / wall:.2f} items/s; database {db}")
    if args.every > 1:
        print(f"sampled every {args.every}th of {len(planned)} items: the whole selection extrapolates to "
              f"{wall * len(planned) / max(len(results), 1) / 60:.1f} min wall")
    print("per status: " + ", ".join(f"{s}={n}" for s, n in sorted(summary.counts.items())))
    by_task = collections.Counter((r.extra.get("task", "?"), r.dtype, r.status.value) for r in results)
    print("\nper task, dtype and status:")
    for (task, dtype, status), n in sorted(by_task.items()):
        print(f"  {task:<24}{dtype:<10}{status:<12}{n:>5}")
    blockers = collections.defaultdict(set)
    for r in results:
        if r.failing_op:
            blockers[r.failing_op].add(r.subject)
    if blockers:
        print("\nops that block the most model types (fix these to unlock them):")
        for op, models in sorted(blockers.items(), key=lambda kv: -len(kv[1]))[:10]:
            print(f"  {op:<40}{len(models):>4}  {', '.join(sorted(models)[:6])}")
    print("\nslowest items:")
    for r in sorted(results, key=lambda r: -r.duration_s)[:5]:
        print(f"  {r.subject:<28}{r.dtype:<10}{r.status.value:<12}{r.duration_s:6.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
