"""Speed of the cold porting scan of the installed Transformers package (issue 44).

    python benchmarks/scan_transformers.py [--repeat 1] [--cores 2] [--before REV] [--json-out DIR]

Target (issue 44): at most 10 s wall on 2 cores, at most 20 s CPU, at most 250 MB. The package is
copied to a temporary folder first (its own __pycache__ left out) and scanned as
`NEURON_CHECK_NO_CACHE=1 neuron-check COPY --static-only --format json`, pinned to --cores CPUs.
Each run prints its wall time, the CPU time (user+sys) of the process and its workers
(resource.getrusage(RUSAGE_CHILDREN)), and the memory: the peak of the tree's proportional set size
(PSS: each page shared by the forked workers counted once, summed over the live processes, sampled
every 50 ms with psutil) and the largest resident set of one process (sampled likewise). On a shared machine the wall time grows with
the load while the CPU time does not, so the load average is printed too.

--before REV also scans with the code of git revision REV (exported with `git archive`) in the
same run, and says whether the two JSON reports are identical: the speed-up must not change
a finding.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float  # user+sys of the process tree
    peak_mb: float  # largest sum of the tree's proportional set sizes seen
    max_rss_mb: float  # largest resident set of one process of the tree


def installed_transformers() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("Transformers is not installed in this Python; nothing to scan.")
    return Path(list(spec.submodule_search_locations)[0])


def _tree_memory(pid: int) -> tuple[int, int]:
    """(sum of the tree's PSS, largest RSS of one of its processes), in bytes."""
    import psutil

    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0, 0
    total = largest = 0
    for p in procs:
        try:
            info = p.memory_full_info()
        except psutil.Error:
            continue
        total += info.pss
        largest = max(largest, info.rss)
    return total, largest


def scan(code: Path, target: Path, output: Path, cores: int) -> Timing:
    env = {**os.environ, "PYTHONPATH": str(code), "NEURON_CHECK_NO_CACHE": "1"}
    allowed = sorted(os.sched_getaffinity(0))[:cores] if hasattr(os, "sched_setaffinity") else None
    pin = (lambda: os.sched_setaffinity(0, allowed)) if allowed else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "porting_cli", str(target), "--static-only", "--format", "json",
                             "-o", str(output)], env=env, cwd=target.parent, preexec_fn=pin,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0, 0]

    def sample() -> None:
        while proc.poll() is None:
            pss, rss = _tree_memory(proc.pid)
            peak[:] = max(peak[0], pss), max(peak[1], rss)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):  # 1: the scan found something that blocks the port
        raise SystemExit(f"the scan failed (exit {proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu, peak[0] / 2**20, peak[1] / 2**20)


def summary(runs: list[Timing]) -> str:
    return (f"wall median {statistics.median(t.wall for t in runs):.2f} s (best {min(t.wall for t in runs):.2f}), "
            f"cpu user+sys median {statistics.median(t.cpu for t in runs):.2f} s, "
            f"memory: peak tree PSS {max(t.peak_mb for t in runs):.0f} MB, "
            f"largest process RSS {max(t.max_rss_mb for t in runs):.0f} MB")


def export_revision(rev: str, into: Path) -> Path:
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--before", default=None, metavar="REV", help="also time this git revision's code")
    parser.add_argument("--json-out", type=Path, default=None, help="keep the JSON reports in this folder")
    args = parser.parse_args(argv)
    source = installed_transformers()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        target = work / "transformers"
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        lines = sum(p.read_text(encoding="utf-8", errors="replace").count("\n") for p in target.rglob("*.py"))
        files = sum(1 for _ in target.rglob("*.py"))
        codes = {"now": REPO}
        if args.before:
            codes = {f"before ({args.before})": export_revision(args.before, work / "before"), **codes}
        outputs = {}
        print(f"cold scan of {source} ({files} files, {lines:,} lines), pinned to {args.cores} cores "
              "(targets: <= 10 s wall, <= 20 s CPU, <= 250 MB)")
        for label, code in codes.items():
            load = os.getloadavg()[0]
            runs = []
            for n in range(args.repeat):
                outputs[label] = work / f"{label.split()[0]}-{n}.json"
                runs.append(scan(code, target, outputs[label], args.cores))
            print(f"  {label}: {summary(runs)} (load average {load:.1f} before)")
        if args.before:
            same = len({outputs[label].read_bytes() for label in codes}) == 1
            print(f"  the two JSON reports are {'identical' if same else 'DIFFERENT'}")
        if args.json_out:
            args.json_out.mkdir(parents=True, exist_ok=True)
            for label, path in outputs.items():
                shutil.copy(path, args.json_out / path.name)
    print(f"load average after: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
          "(wall time is inflated by the load; the CPU time much less)")


if __name__ == "__main__":
    main()
