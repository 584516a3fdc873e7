"""What the native sim device costs at start: the first build, and each later start.

    python benchmarks/sim_start.py                 later starts only (the cached library)
    python benchmarks/sim_start.py --build         also one first build into an empty cache
    python benchmarks/sim_start.py --before REV    also register() from commit REV, for comparison

Each figure comes from fresh Python processes (torch already imported when the clock starts),
best of --repeat: wall and CPU seconds of `build.load()` (hash the sources, load the cached
library) and of the whole `conformance.sim.register()`. The first build is timed as one
process from an empty cache folder (wall and CPU of the compiler processes included).
Targets (2-core machine): first build at most 60 s; each later start at most 0.1 s more.
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

_PROBE = """
import json, time, torch
w, c = time.perf_counter(), time.process_time()
load = None
try:
    from conformance.sim import build
    build.load()
    load = (time.perf_counter() - w, time.process_time() - c)
except ImportError:
    pass  # a tree from before the native device
import conformance.sim as sim
sim.register()
print(json.dumps({"load": load, "register": (time.perf_counter() - w, time.process_time() - c)}))
"""


def probe(tree: Path, repeat: int, env: dict) -> dict:
    runs = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", _PROBE], cwd=tree, env={**env, "PYTHONPATH": str(tree)},
                              capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    best = {}
    for key in ("load", "register"):
        found = [r[key] for r in runs if r[key] is not None]
        if found:
            best[key] = (min(f[0] for f in found), min(f[1] for f in found))
    return best


def first_build(env: dict) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as cache:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch; from conformance.sim import build; build.load()"],
                       cwd=ROOT, env={**env, "NEURON_CHECK_SIM_CACHE": cache, "PYTHONPATH": str(ROOT)}, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return time.perf_counter() - started, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", action="store_true", help="also time a first build into an empty cache")
    parser.add_argument("--before", metavar="REV", help="also time register() from commit REV")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "NEURON_CHECK_SIM_PROFILE"}
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    if args.build:
        wall, cpu = first_build(env)
        print(f"first build: wall {wall:.1f} s, cpu {cpu:.1f} s (target wall <= 60 s on 2 cores)")
    probe(ROOT, 1, env)  # make sure the cached library exists before timing starts
    after = probe(ROOT, args.repeat, env)
    print(f"later start: load {after['load'][0]:.3f} s wall / {after['load'][1]:.3f} s cpu, "
          f"register {after['register'][0]:.3f} s wall / {after['register'][1]:.3f} s cpu (best of {args.repeat})")
    if args.before:
        with tempfile.TemporaryDirectory() as scratch:
            tree = Path(scratch) / "before"
            tree.mkdir()
            archive = subprocess.run(["git", "archive", args.before], cwd=ROOT, capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
            before = probe(tree, args.repeat, env)
        extra = after["register"][1] - before["register"][1]
        print(f"before {args.before}: register {before['register'][0]:.3f} s wall / {before['register'][1]:.3f} s cpu; "
              f"the native device's start costs {extra:+.3f} s cpu more (target <= 0.1 s)")


if __name__ == "__main__":
    main()
