"""How long does the fp32 forward compile sweep take on sim, and how often is a compiled graph reused?

    python benchmarks/compile_sweep.py                     the whole fp32 forward sweep, --jobs 2
    python benchmarks/compile_sweep.py --shard 1/20        one twentieth of it (a stable sample)
    python benchmarks/compile_sweep.py --ops sin,mul,nonzero

Two `neuron-check ops --device sim --dtype fp32` processes on the same selection, one after the
other in this run: `--mode compile`, then `--mode eager`. Printed: wall of each, their ratio,
the items and statuses, the compile time summed over items, and the compile-cache hit rate:
the share of compiled-callable calls (one per sample) that compiled nothing because a graph
compiled for an earlier sample of the item fit (samples of one shape reuse one graph).
Target (2-core machine): the whole compile sweep with 2 jobs in at most 20 minutes. A shard's
wall times the number of shards estimates the whole sweep.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TARGET_S = 20 * 60


def sweep(mode: str, jobs: int, workdir: Path, selection: list[str]) -> dict:
    from op_db.store import Store

    db = workdir / f"sweep-{mode}.db"
    env = {k: v for k, v in os.environ.items() if k != "NEURON_CHECK_SIM_PROFILE"}
    env["PYTHONPATH"] = str(ROOT)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "porting_cli", "ops", "--device", "sim", "--dtype", "fp32",
                           "--mode", mode, "--jobs", str(jobs), "--db", str(db), *selection],
                          env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"neuron-check ops --mode {mode} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    with Store.open(db, readonly=True) as store:
        run_id = store.resolve_run("latest")
        results = store.results(run_id)
        counts = {k: v for k, v in store.status_counts(run_id).items() if v}
    facts = [r.compile for r in results if r.compile]
    for r in results:
        if r.status.value not in ("PASS", "FALLBACK", "SKIP"):
            print(f"  {mode}: {r.subject} {r.status.value}: {(r.message or '')[:160]}")
    return {"mode": mode, "wall": wall, "items": len(results), "counts": counts,
            "compile_s": sum(f.get("compile_s", 0.0) for f in facts),
            "calls": sum(f.get("calls", 0) for f in facts), "hits": sum(f.get("cache_hits", 0) for f in facts),
            "breaks": sum(1 for f in facts if f.get("graph_breaks"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--shard", default=None, help="K/N: a stable 1/N of the sweep")
    parser.add_argument("--ops", default=None, help="comma list of OpInfo names")
    args = parser.parse_args(argv)
    ops = args.ops
    if args.shard and not ops:  # the same ops in both modes (a shard of items depends on the mode)
        from conformance.planning import OpsOptions
        from conformance.suite import plan

        ops = ",".join(sorted({i.subject for i in plan("ops", OpsOptions(dtypes=("float32",), shard=args.shard))}))
    selection = ["--ops", ops] if ops else []
    shards = int(args.shard.split("/")[1]) if args.shard else 1
    with tempfile.TemporaryDirectory() as tmp:
        compiled = sweep("compile", args.jobs, Path(tmp), selection)
        eager = sweep("eager", args.jobs, Path(tmp), selection)
    for row in (compiled, eager):
        print(f"{row['mode']:8s} wall {row['wall']:8.1f} s  items {row['items']:4d}  {row['counts']}")
    hit_rate = compiled["hits"] / compiled["calls"] if compiled["calls"] else 0.0
    print(f"compile/eager wall ratio: {compiled['wall'] / eager['wall']:.2f}x")
    print(f"compile time summed over items: {compiled['compile_s']:.1f} s; items with a graph break: {compiled['breaks']}")
    print(f"compile-cache hit rate: {hit_rate:.1%} of {compiled['calls']} compiled calls compiled nothing")
    if args.ops is None:  # a shard, or the whole sweep
        estimate = compiled["wall"] * shards
        verdict = "meets" if estimate <= TARGET_S else "misses"
        print(f"whole fp32 compile sweep, jobs={args.jobs}: {'measured' if shards == 1 else 'estimated'} "
              f"{estimate / 60:.1f} min ({verdict} the {TARGET_S // 60}-minute target)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
