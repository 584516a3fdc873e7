"""The fault-free nightly on sim, part by part: each part's wall and CPU time and its statuses, so
that a regression in any one part shows (issue 44).

    python benchmarks/nightly.py                          every part, whole (hours on 2 cores)
    python benchmarks/nightly.py --sample 20              1/20 of each part that can be sampled
    python benchmarks/nightly.py --parts zoo --before 01d3884

Parts (the nightly a backend team runs; `--parts` takes a comma list of names):

    ops-fp32, ops-bf16, ops-fp16   neuron-check ops --dtype D --grad (eager, forward and backward)
    ops-compile                    neuron-check ops --dtype fp32 --mode compile
    fp8                            neuron-check ops --dtype fp8
    dist                           neuron-check dist
    diffusers-census               neuron-check models --library diffusers --list --check-build
    diffusers                      neuron-check models --library diffusers --dtype fp32 --no-divergence
    zoo                            the Transformers zoo, one task per type, --grad (benchmarks/models_sweep.py)

`--sample N` runs shard 1/N of the ops parts and every Nth zoo item, and prints the whole part's
time extrapolated (xN); dist and the Diffusers parts are not sampled. Every part is one process
tree, timed for wall clock and CPU (user+sys of the tree, resource.getrusage(RUSAGE_CHILDREN), this
process the reaper of the tree's orphans, such as the workers' server):
on a loaded machine the wall time grows with the load and the CPU time does not, so the load
average is printed beside each part. `--before REV` runs each part first from a copy of commit
REV (`git archive`), so that before and after come from one run on one machine, with the ratio,
and compares the two runs item by item (status, sample counts, first failing sample) wherever
the part keeps a database.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from opinfo_sweep import adopt_orphans, differences, item_verdict, reap_orphans, source_tree  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Part:
    name: str
    arguments: tuple[str, ...]  # after `python -m porting_cli`, or a benchmarks/ script first
    sampling: str = ""  # "shard": --shard 1/N; "every": --every N; "": never sampled


PARTS = (
    Part("ops-fp32", ("ops", "--device", "sim", "--dtype", "fp32", "--grad", "-j", "2"), "shard"),
    Part("ops-bf16", ("ops", "--device", "sim", "--dtype", "bf16", "--grad", "-j", "2"), "shard"),
    Part("ops-fp16", ("ops", "--device", "sim", "--dtype", "fp16", "--grad", "-j", "2"), "shard"),
    Part("ops-compile", ("ops", "--device", "sim", "--dtype", "fp32", "--mode", "compile", "-j", "2"), "shard"),
    Part("fp8", ("ops", "--device", "sim", "--dtype", "fp8", "-j", "2"), "shard"),
    Part("dist", ("dist", "--device", "sim")),
    Part("diffusers-census", ("models", "--library", "diffusers", "--list", "--check-build", "-j", "2",
                              "--format", "json")),
    Part("diffusers", ("models", "--library", "diffusers", "--device", "sim", "--dtype", "fp32", "-j", "2",
                       "--no-divergence")),
    Part("zoo", ("benchmarks/models_sweep.py", "--task", "all", "--one-task-per-type", "--grad",
                 "--dtype", "fp32", "--jobs", "2"), "every"),
)
_STATUS = re.compile(r"\b(PASS|MISMATCH|FALLBACK|UNSUPPORTED|ERROR|CRASH|TIMEOUT|SKIP|REF_ERROR)=(\d+)")


@dataclasses.dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float
    load: float  # 1-minute load average when the part ended
    exit: int
    statuses: str
    db: str = ""  # the part's run database, where it has one


def command(part: Part, tree: Path, sample: int, db: str) -> list[str]:
    if part.arguments[0].endswith(".py"):
        line = [sys.executable, str(tree / part.arguments[0]), *part.arguments[1:], "--db", db]
    else:
        line = [sys.executable, "-m", "porting_cli", *part.arguments]
        if "--list" not in part.arguments:
            line += ["--db", db]
    if sample > 1 and part.sampling == "shard":
        line += ["--shard", f"1/{sample}"]
    elif sample > 1 and part.sampling == "every":
        line += ["--every", str(sample)]
    return line


def statuses(output: str, db: str) -> str:
    """Counts per status: from the run's database where the part has one, else from its output."""
    if os.path.exists(db):
        from op_db.store import Store

        store = Store.open(db, readonly=True)
        try:
            counts: dict[str, int] = {}
            for run in store.runs():
                for result in store.results(run["id"]):
                    counts[result.status.value] = counts.get(result.status.value, 0) + 1
        finally:
            store.close()
        return ", ".join(f"{s}={n}" for s, n in sorted(counts.items()))
    return ", ".join(f"{s}={n}" for s, n in _STATUS.findall(output)[-9:])


def run_part(part: Part, tree: Path, sample: int, scratch: Path) -> Timing:
    db = str(scratch / f"{part.name}-{time.monotonic_ns()}.db")
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("NEURON_CHECK_SIM_PROFILE", None)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command(part, tree, sample, db), cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    reap_orphans()  # the workers' server outlives the part by a moment; its CPU counts once waited for
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (usage.ru_utime + usage.ru_stime)
    if done.returncode not in (0, 1):  # 1: some item failed, which a fault-free nightly reports too
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        print(f"  {part.name}: exit {done.returncode}: {tail[0]}", file=sys.stderr)
    return Timing(wall, cpu, os.getloadavg()[0], done.returncode, statuses(done.stdout, db),
                  db if os.path.exists(db) else "")


def item_verdicts(db: str) -> dict:
    """Every item of the run database with its verdict, as opinfo_sweep.differences reads them."""
    from op_db.store import Store

    with Store.open(db, readonly=True) as store:
        return {"verdicts": {r.item: item_verdict(r) for run in store.runs() for r in store.results(run["id"])}}


def changed_items(before: Timing, after: Timing) -> str:
    """The item-by-item comparison of two runs of a part (status, sample counts, first failing
    sample): which items changed, or were lost or gained; "" for a part without a database."""
    if not (before.db and after.db):
        return ""
    was, now = item_verdicts(before.db), item_verdicts(after.db)
    changes, _ = differences(was, now)
    if not changes:
        return f"item by item: all {len(now['verdicts'])} items the same verdict"
    total = len(set(was["verdicts"]) | set(now["verdicts"]))
    return f"item by item: {len(changes)} of {total} changed: " + "; ".join(changes[:20])


def show(label: str, part: Part, timing: Timing, sample: int) -> None:
    scale = sample if sample > 1 and part.sampling else 1
    whole = f" (whole part ~{timing.wall * scale / 60:.1f} min wall, {timing.cpu * scale / 60:.1f} min CPU)" \
        if scale > 1 else ""
    print(f"{part.name:<18}{label:<10}{timing.wall:>9.1f} s wall{timing.cpu:>9.1f} s CPU  load {timing.load:4.1f}  "
          f"exit {timing.exit}{whole}\n{'':<28}{timing.statuses}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(p.name for p in PARTS), help="comma list of part names")
    parser.add_argument("--sample", type=int, default=1, metavar="N", help="run 1/N of each part that can be sampled")
    parser.add_argument("--before", metavar="REV", help="also run each part from commit REV, first")
    args = parser.parse_args()
    known = {p.name: p for p in PARTS}
    wanted = [name.strip() for name in args.parts.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in known]
    if unknown or args.sample < 1:
        print(f"unknown part(s): {', '.join(unknown)}; parts: {', '.join(known)}" if unknown
              else "--sample must be at least 1", file=sys.stderr)
        return 2
    adopt_orphans()
    with tempfile.TemporaryDirectory(prefix="nightly-bench-") as folder:
        scratch = Path(folder)
        before = source_tree(args.before, scratch) if args.before else None
        total = {"after": [0.0, 0.0], "before": [0.0, 0.0]}
        for name in wanted:
            part = known[name]
            if before is not None:
                was = run_part(part, before, args.sample, scratch)
                show("before", part, was, args.sample)
                total["before"][0] += was.wall
                total["before"][1] += was.cpu
            now = run_part(part, ROOT, args.sample, scratch)
            show("after" if before is not None else "", part, now, args.sample)
            total["after"][0] += now.wall
            total["after"][1] += now.cpu
            if before is not None and (comparison := changed_items(was, now)):
                print(f"{'':<28}{comparison}")
            if before is not None:
                print(f"{'':<28}speed-up {was.wall / max(now.wall, 1e-9):.2f}x wall, "
                      f"{was.cpu / max(now.cpu, 1e-9):.2f}x CPU")
        print(f"all parts: {total['after'][0]:.1f} s wall, {total['after'][1]:.1f} s CPU"
              + (f" (before: {total['before'][0]:.1f} s wall, {total['before'][1]:.1f} s CPU)" if before else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
