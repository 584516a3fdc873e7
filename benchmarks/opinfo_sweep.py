"""How fast is `neuron-check ops` on the sim device, against the plainest loop that could do the job?

    python benchmarks/opinfo_sweep.py                    fp32 forward sweep, --jobs 1 and 2, plus the plain loop
    python benchmarks/opinfo_sweep.py --dtype fp32,bf16,fp16 --jobs 2 --no-plain
    python benchmarks/opinfo_sweep.py --dtype fp32,bf16,fp16 --jobs 1 --no-plain --before 2a88640
                                                         the same sweep from commit 2a88640 too, in this run

Each configuration runs as its own `neuron-check ops` process with a fresh database, and
is timed from process start to exit (imports, worker start-up and the summary included).
The plain loop is one process: import op_db, then for every op and dtype of the same plan,
sample_inputs on CPU, run on CPU and on sim, assert_close. Printed per configuration:
wall, items/s, samples/s and the harness overhead: wall divided by the time spent inside
op calls per worker (sum of the items' op_time_s / jobs); 1.0 would be a free harness.
That figure is split in two: the items' own run time over their op time, and the seconds
outside items (process start, where the worker imports torch and PyTorch's OpInfo database,
and the engine's hand-offs), paid once per run. Op time is what runs inside the op calls
on CPU and device, the CPU reference and float64 oracle included. It also holds the
dispatch of the aten-op recorder around each device call: harness work that cannot be
timed apart from the op it wraps, so the overhead figures are, if anything, flattering.
Also printed: the CPU seconds each configuration's processes used (the worker server of
conformance/engine/preforked.py and its workers included, which outlive the command by a
moment and are reaped here), which, unlike wall, does not depend on what else the (shared)
machine is running.
Targets (2-core machine): full fp32+bf16+fp16 forward sweep with 2 jobs in at most
6 minutes; jobs=2 at least 1.7x faster than jobs=1; engine wall at most 0.75x the plain loop;
harness overhead at jobs=1 at most 1.4x op time. `--before REV` runs each configuration
first from a copy of commit REV (`git archive`), so before and after come from one run on
one machine load, and compares the two runs item by item (status, sample counts and first
failing sample; numerics statistics apart); `--ops` narrows the sweep to a comma list of OpInfo names.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_engine(dtypes: str, jobs: int, workdir: Path, tree: Path = ROOT, label: str = "engine",
               ops: str | None = None) -> dict:
    """One `neuron-check ops` process of the source tree `tree` (this checkout, or --before's copy)."""
    from op_db.store import Store

    db = workdir / f"sweep-{label.replace(' ', '_')}-{dtypes.replace(',', '_')}-j{jobs}.db"
    env = {k: v for k, v in os.environ.items() if k != "NEURON_CHECK_SIM_PROFILE"}
    env["PYTHONPATH"] = str(tree)
    selection = ["--ops", ops] if ops else []
    started, cpu_before = time.perf_counter(), _children_cpu()
    done = subprocess.run([sys.executable, "-m", "porting_cli", "ops", "--device", "sim", "--dtype", dtypes, "--jobs", str(jobs),
                           "--db", str(db), *selection], env=env, capture_output=True, text=True, cwd=tree)
    wall = time.perf_counter() - started
    reap_orphans()
    cpu = _children_cpu() - cpu_before
    if done.returncode not in (0, 1):
        sys.exit(f"neuron-check ops failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    with Store.open(db, readonly=True) as store:
        run_id = store.resolve_run("latest")
        results = store.results(run_id)
        counts = store.status_counts(run_id)
    op_time = sum(float(r.extra.get("op_time_s", 0.0) or 0.0) for r in results)
    return {"label": f"{label} jobs={jobs}", "wall": wall, "cpu": cpu, "items": len(results),
            "samples": sum(r.samples for r in results), "op_time": op_time, "jobs": jobs,
            "item_time": sum(r.duration_s for r in results), "counts": {k: v for k, v in counts.items() if v},
            "verdicts": {r.item: item_verdict(r) for r in results}}


def item_verdict(result) -> tuple:
    """What a harness change must not move: status, sample counts and the first failing
    sample; then the numerics statistics (rule 5), which a nondeterministic CPU kernel
    (LAPACK's lstsq, run to run) may move on its own."""
    return ((result.status.value, result.samples, result.samples_passed, result.first_failure),
            json.dumps(result.numerics, sort_keys=True))


def differences(before: dict, after: dict) -> tuple[list[str], list[str]]:
    """Items whose verdict, and items whose numerics statistics, differ between two runs of
    one plan, by name."""
    verdicts, numerics = [], []
    for item in sorted(set(before["verdicts"]) | set(after["verdicts"])):
        was, now = before["verdicts"].get(item), after["verdicts"].get(item)
        name = item.test_id
        if was is None or now is None or was[0] != now[0]:
            verdicts.append(f"{name}: before {was and was[0]}, after {now and now[0]}")
        elif was[1] != now[1]:
            numerics.append(name)
    return verdicts, numerics


def source_tree(rev: str, workdir: Path) -> Path:
    """A copy of commit `rev` of this repository (git archive), to time the code as it was."""
    tree = workdir / f"tree-{rev}"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def adopt_orphans() -> None:
    """Become the reaper of the runs' orphaned descendants (Linux): the worker server
    (conformance/engine/preforked.py) and its workers outlive the command by a moment, and
    their CPU seconds count only once someone here waits for them."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def reap_orphans() -> None:
    """Wait for every descendant left (they end once the command has: lifeline.py)."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


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
    from conformance.planning import OpsOptions
    from conformance.suite import plan as plan_command

    sim.register()
    wanted = {(i.subject, i.dtype) for i in plan_command("ops", OpsOptions(dtypes=tuple(dtypes)))}
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


def _overhead(row: dict) -> float:
    """Wall over the time spent inside op calls per worker: 1.0 would be a free harness."""
    return row["wall"] / (row["op_time"] / row["jobs"])


def _split(row: dict) -> str:
    """The overhead inside items (each item's own run time over its op time) and what is left:
    the process start (Python, torch and PyTorch's OpInfo database imported by the worker) and
    the engine's hand-offs, paid once per run however long the sweep."""
    outside = row["wall"] - row["item_time"] / row["jobs"]
    return f"inside items {row['item_time'] / row['op_time']:.2f}x op time, outside items {outside:.1f} s"


def show(row: dict) -> None:
    overhead = ""
    if row["op_time"]:
        overhead = f", overhead {_overhead(row):.2f}x op time; {_split(row)}"
    print(f"{row['label']:<15} wall {row['wall']:7.1f} s, {row['items'] / row['wall']:6.1f} items/s, "
          f"{row['samples'] / row['wall']:7.1f} samples/s, cpu {row['cpu']:6.1f} s ({row['items']} items, {row['samples']} samples{overhead})"
          + (f"  {row['counts']}" if row.get("counts") else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="fp32", help="dtypes of the sweep (default fp32)")
    parser.add_argument("--jobs", default="1,2", help="comma list of --jobs values to time (default 1,2)")
    parser.add_argument("--no-plain", action="store_true", help="skip the plain-loop baseline")
    parser.add_argument("--before", metavar="REV", help="also time each configuration from commit REV, first")
    parser.add_argument("--ops", default=None, help="comma list of OpInfo names to sweep (default: every op)")
    parser.add_argument("--keep", metavar="DIR", help="write the runs' databases to DIR (default: a temporary folder)")
    parser.add_argument("--plain-threads", type=int, default=None,
                        help="also time the plain loop with this many intra-op threads (the engine's OpInfo "
                             "workers use 1); the target compares with torch's default")
    parser.add_argument("--plain-loop", metavar="DTYPES", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_loop:
        plain_loop(args.plain_loop.split(","), args.plain_threads)
        return
    adopt_orphans()
    print(f"OpInfo forward sweep on sim, dtypes {args.dtype}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at start")
    rows = {}
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or scratch
        if args.keep:
            Path(tmp).mkdir(parents=True, exist_ok=True)
        before_tree = source_tree(args.before, Path(scratch)) if args.before else None
        for jobs in (int(j) for j in args.jobs.split(",")):
            if before_tree is not None:
                before = run_engine(args.dtype, jobs, Path(tmp), before_tree, f"before {args.before}", args.ops)
                show(before)
            rows[jobs] = run_engine(args.dtype, jobs, Path(tmp), ops=args.ops, label="after" if before_tree else "engine")
            show(rows[jobs])
            if before_tree is not None:
                print(f"harness overhead at jobs={jobs}: before {_overhead(before):.2f}x, after {_overhead(rows[jobs]):.2f}x "
                      f"op time" + (" (target <= 1.4x)" if jobs == 1 else ""))
                changed, numerics = differences(before, rows[jobs])
                print(f"items whose status, sample counts or first failure differ: {len(changed)} "
                      f"of {len(rows[jobs]['verdicts'])}; whose numerics statistics differ: {len(numerics)}"
                      + (f" ({', '.join(numerics[:10])})" if numerics else ""))
                for line in changed[:20]:
                    print("  " + line)
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
