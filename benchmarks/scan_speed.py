"""Speed of the static porting check: one 1,500-line script from the command line, and a
50,000-line repository scanned in-process on a pool of workers.

    python benchmarks/scan_speed.py [--lines 1500] [--repo-lines 50000] [--jobs 2] [--repeat 3]

Targets (issue 13): the single file with --static-only at most 0.5 s end to end, interpreter
start-up included; the repository at most 10 s on 2 cores. Inputs are generated here from
synthetic sources (benchmarks/scan_throughput.py's generator), never third-party code.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from scan_throughput import make_source  # noqa: E402


def scan_and_patch(path: str) -> int:
    from porting_cli.fix import fix_source
    from porting_cli.scan import scan_file

    result = scan_file(path)
    fix_source(Path(path).read_text(), path)  # the report's patch comes from the same analysis
    return len(result.findings)


def single_file(lines: int, repeat: int, workdir: Path) -> list[float]:
    script = workdir / "train.py"
    script.write_text(make_source(lines, 0.25))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "porting_cli", str(script), "--static-only", "--format", "json",
                        "-o", os.devnull], check=True, capture_output=True, env=env, cwd=workdir)
        times.append(time.perf_counter() - start)
    return times


def repository(total: int, jobs: int, workdir: Path) -> tuple[float, int, int]:
    files = []
    per_file = 500
    for n in range(total // per_file):
        path = workdir / "repo" / f"pkg{n % 10}" / f"module_{n}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(make_source(per_file, 0.1 if n % 3 else 0.3))
        files.append(str(path))
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        findings = sum(pool.map(scan_and_patch, files, chunksize=4))
    return time.perf_counter() - start, len(files), findings


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1500)
    parser.add_argument("--repo-lines", type=int, default=50_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        times = single_file(args.lines, args.repeat, workdir)
        print(f"single file: {args.lines} lines, neuron-check --static-only: median {statistics.median(times):.2f} s, "
              f"best {min(times):.2f} s (target <= 0.5 s; start-up included)")
        seconds, n_files, findings = repository(args.repo_lines, args.jobs, workdir)
        print(f"repository: {args.repo_lines} lines in {n_files} files, {findings} findings, scan + patch on "
              f"{args.jobs} workers: {seconds:.2f} s (target <= 10 s on 2 cores)")
    print(f"load average now: {os.getloadavg()[0]:.1f} (the figures are wall time on a shared machine)")


if __name__ == "__main__":
    main()
