"""How fast is `neuron-check ops` on the sim device, against the plainest loop that could do the job?

    python benchmarks/opinfo_sweep.py                    fp32 forward sweep, --jobs 1 and 2, plus the plain loop
    python benchmarks/opinfo_sweep.py --dtype fp32,bf16,fp16 --jobs 2 --no-plain

Each configuration runs as its own `neuron-check ops` process with a fresh database, and
is timed from process start to exit (imports, worker start-up and the summary included).
The plain loop is one process: import op_db, then for every op and dtype of the same plan,
sample_inputs on CPU, run on CPU and on sim, assert_close. Printed per configuration:
wall, items/s, samples/s and the harness overhead: wall divided by the time spent inside
op calls per worker (sum of the items' op_time_s / jobs); 1.0 would be a free harness.
Also printed: the CPU seconds each configuration's processes used, which, unlike wall,
does not depend on what else the (shared) machine is running.
Targets (2-core machine): full fp32+bf16+fp16 forward sweep with 2 jobs in at most
6 minutes; jobs=2 at least 1.7x faster than jobs=1; engine wall at most 0.75x the plain loop.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_engine(dtypes: str, jobs: int, workdir: Path) -> dict:
    from op_db.store import Store

    db = workdir / f"sweep-{dtypes.replace(',', '_')}-j{jobs}.db"
    env = {k: v for k, v in os.environ.items() if k != "NEURON_CHECK_SIM_PROFILE"}
    started, cpu_before = time.perf_counter(), _children_cpu()
    done = subprocess.run([sys.executable, "-m", "porting_cli", "ops", "--device", "sim", "--dtype", dtypes, "--jobs", str(jobs),
                           "--db", str(db)], env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - started, _children_cpu() - cpu_before
    if done.returncode not in (0, 1):
        sys.exit(f"neuron-check ops failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    with Store.open(db, readonly=True) as store:
        run_id = store.resolve_run("latest")
        results = store.results(run_id)
        counts = store.status_counts(run_id)
    op_time = sum(float(r.extra.get("op_time_s", 0.0) or 0.0) for r in results)
    return {"label": f"engine jobs={jobs}", "wall": wall, "cpu": cpu, "items": len(results),
            "samples": sum(r.samples for r in results), "op_time": op_time, "jobs": jobs,
            "counts": {k: v for k, v in counts.items() if v}}


def _children_cpu() -> float:
    """CPU seconds (user + system) of finished child processes and theirs: on a shared machine
    this, unlike wall, does not grow with other people's load."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def plain_loop(dtypes: list[str], threads: int | None = None) -> None:
    """The baseline, run in its own process: prints items and samples it ran."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.utils import _pytree as pytree

    import conformance.sim as sim
    from conformance.planning import PlanOptions, plan

    sim.register()
    wanted = {(i.subject, i.dtype) for i in plan(PlanOptions(dtypes=tuple(dtypes)), "sim")}
    items = samples = 0
    for op in op_db:
        for dtype_name in dtypes:
            if (op.full_name, dtype_name) not in wanted:
                continue
            items += 1
            dtype = getattr(torch, dtype_name)
            try:
                for sample in op.sample_inputs("cpu", dtype):
                    samples += 1
                    expected = op(sample.input, *sample.args, **sample.kwargs)
                    moved = sample.transform(lambda t: t.to("sim") if isinstance(t, torch.Tensor) else t)
                    try:
                        actual = op(moved.input, *moved.args, **moved.kwargs)
                        actual = pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, actual)
                        torch.testing.assert_close(actual, expected, equal_nan=True)
                    except Exception:
                        pass
            except Exception:
                pass
    print(f"PLAIN {items} {samples}")


def run_plain(dtypes: str, threads: int | None = None) -> dict:
    from conformance.planning import parse_dtypes

    names = ",".join(parse_dtypes(dtypes.split(",")))
    started, cpu_before = time.perf_counter(), _children_cpu()
    threads_args = ["--plain-threads", str(threads)] if threads else []
    done = subprocess.run([sys.executable, __file__, "--plain-loop", names, *threads_args], capture_output=True, text=True)
    wall, cpu = time.perf_counter() - started, _children_cpu() - cpu_before
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("PLAIN ")]
    if not line:
        sys.exit(f"the plain loop failed: {done.stderr.strip()[-500:]}")
    _, items, samples = line[0].split()
    return {"label": f"plain loop{f' {threads}T' if threads else ''}", "wall": wall, "cpu": cpu, "items": int(items), "samples": int(samples), "op_time": None, "jobs": 1}


def show(row: dict) -> None:
    overhead = ""
    if row["op_time"]:
        overhead = f", overhead {row['wall'] / (row['op_time'] / row['jobs']):.2f}x op time"
    print(f"{row['label']:<15} wall {row['wall']:7.1f} s, {row['items'] / row['wall']:6.1f} items/s, "
          f"{row['samples'] / row['wall']:7.1f} samples/s, cpu {row['cpu']:6.1f} s ({row['items']} items, {row['samples']} samples{overhead})"
          + (f"  {row['counts']}" if row.get("counts") else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="fp32", help="dtypes of the sweep (default fp32)")
    parser.add_argument("--jobs", default="1,2", help="comma list of --jobs values to time (default 1,2)")
    parser.add_argument("--no-plain", action="store_true", help="skip the plain-loop baseline")
    parser.add_argument("--plain-threads", type=int, default=None,
                        help="also time the plain loop with this many intra-op threads (the engine's OpInfo "
                             "workers use 1); the target compares with torch's default")
    parser.add_argument("--plain-loop", metavar="DTYPES", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_loop:
        plain_loop(args.plain_loop.split(","), args.plain_threads)
        return
    print(f"OpInfo forward sweep on sim, dtypes {args.dtype}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at start")
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for jobs in (int(j) for j in args.jobs.split(",")):
            rows[jobs] = run_engine(args.dtype, jobs, Path(tmp))
            show(rows[jobs])
    plain = None if args.no_plain else run_plain(args.dtype)
    if plain:
        show(plain)
    plain_threads = run_plain(args.dtype, args.plain_threads) if plain and args.plain_threads else None
    if plain_threads:
        show(plain_threads)
    if 1 in rows and 2 in rows:
        print(f"speed-up jobs=2 over jobs=1: {rows[1]['wall'] / rows[2]['wall']:.2f}x (target >= 1.7x)")
    if plain and 2 in rows:
        print(f"engine jobs=2 wall / plain loop wall: {rows[2]['wall'] / plain['wall']:.2f} (target <= 0.75)")
    if plain_threads and 2 in rows:
        print(f"engine jobs=2 wall / {plain_threads['label']} wall: {rows[2]['wall'] / plain_threads['wall']:.2f}")
    if plain and 2 in rows:
        print(f"engine jobs=2 cpu / plain loop cpu: {rows[2]['cpu'] / plain['cpu']:.2f} (load-independent)")
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
