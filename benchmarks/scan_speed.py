"""Speed of the static porting check from the command line: one 1,500-line script, and a
50,000-line repository in project mode, each cold (empty scan cache) and warm (cached).

    python benchmarks/scan_speed.py [--lines 1500] [--repo-lines 50000] [--cores 2] [--repeat 3]

Targets (issue 13): the single file with --static-only at most 0.5 s end to end, interpreter
start-up included; the repository at most 10 s on 2 cores. Every figure is one
`neuron-check ... --static-only --format json` process, timed twice: wall clock, and the CPU
time (user+sys) of the process and its workers from resource.getrusage(RUSAGE_CHILDREN). On a
shared, loaded machine the wall time grows with the load while the CPU time does not, so the
load average is printed too: read CPU/cores as the wall time of an idle machine. The
repository run is pinned to --cores CPUs (sched_setaffinity), which is what the scan's worker
pool sizes itself by. Inputs are generated here from synthetic sources
(benchmarks/scan_throughput.py's generator), never third-party code.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from scan_throughput import make_source  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float  # user+sys of the child process tree


def run_cli(target: Path, cache: Path, cores: int | None = None) -> Timing:
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(cache)}
    env.pop("NEURON_CHECK_NO_CACHE", None)
    pin = None
    if cores and hasattr(os, "sched_setaffinity"):
        allowed = sorted(os.sched_getaffinity(0))[:cores]
        pin = lambda: os.sched_setaffinity(0, allowed)  # noqa: E731
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "porting_cli", str(target), "--static-only", "--format", "json",
                    "-o", os.devnull], check=True, capture_output=True, env=env, cwd=target.parent,
                   preexec_fn=pin)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu)


def measure(target: Path, workdir: Path, repeat: int, cores: int | None = None) -> tuple[list[Timing], list[Timing]]:
    """(cold runs, warm runs): each cold run gets an empty cache, the warm ones share one."""
    cold = [run_cli(target, Path(tempfile.mkdtemp(dir=workdir)), cores) for _ in range(repeat)]
    shared = Path(tempfile.mkdtemp(dir=workdir))
    run_cli(target, shared, cores)
    warm = [run_cli(target, shared, cores) for _ in range(repeat)]
    return cold, warm


def summary(runs: list[Timing]) -> str:
    return (f"wall median {statistics.median(t.wall for t in runs):.2f} s (best {min(t.wall for t in runs):.2f}), "
            f"cpu user+sys median {statistics.median(t.cpu for t in runs):.2f} s")


def make_repository(root: Path, total: int, per_file: int = 500) -> int:
    n_files = total // per_file
    for n in range(n_files):
        path = root / f"pkg{n % 10}" / f"module_{n}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(make_source(per_file, 0.1 if n % 3 else 0.3))
    return n_files


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1500)
    parser.add_argument("--repo-lines", type=int, default=50_000)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        script = workdir / "single" / "train.py"
        script.parent.mkdir()
        script.write_text(make_source(args.lines, 0.25))
        cold, warm = measure(script, workdir, args.repeat)
        print(f"single file: {args.lines} lines, neuron-check FILE --static-only (start-up included; "
              f"target <= 0.5 s)\n  cold: {summary(cold)}\n  warm: {summary(warm)}")
        repo = workdir / "repo"
        n_files = make_repository(repo, args.repo_lines)
        cold, warm = measure(repo, workdir, max(1, args.repeat - 2), args.cores)
        print(f"repository: {args.repo_lines} lines in {n_files} files, neuron-check REPO --static-only "
              f"pinned to {args.cores} cores (target <= 10 s)\n  cold: {summary(cold)} "
              f"(cpu/{args.cores} = {statistics.median(t.cpu for t in cold) / args.cores:.2f} s)\n"
              f"  warm: {summary(warm)}")
    print(f"load average: {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs "
          "(wall time is inflated by the load; the CPU time is not)")


if __name__ == "__main__":
    main()
