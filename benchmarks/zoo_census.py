"""Zoo census speed: every (type, task) pair built tiny with one CPU forward (target: <= 20 minutes
with -j 2 on 2 cores), the figures `models --list --check-build` prints.

    python benchmarks/zoo_census.py [--jobs 2] [--every 1] [--task TASK,...] [--json out.json]

With --every N only every Nth pair runs and the full census time is extrapolated (the machine
is shared: say the load average, which this script prints before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--every", type=int, default=1)
    parser.add_argument("--task", default=None)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per pair before it is a TIMEOUT")
    parser.add_argument("--json", default=None, help="write every pair's status and the summary here")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from conformance.models import zoo
    from conformance.models.census import census
    from conformance.models.census_report import render_listing, summarise

    everything = zoo.select(tasks=args.task.split(",") if args.task else None)
    entries = everything[::args.every]
    print(f"load average before: {os.getloadavg()[0]:.2f}; {len(entries)} of {len(everything)} pairs, "
          f"-j {args.jobs}", flush=True)
    start = time.perf_counter()
    statuses = census([e.subject for e in entries], jobs=args.jobs, timeout_s=args.timeout)
    wall = time.perf_counter() - start
    summary = summarise(entries, statuses)
    rows = [{**e.to_dict(), "build": statuses[e.subject].status, "aten_ops": len(statuses[e.subject].ops)}
            for e in entries]
    from reports.sanitize import for_terminal

    print(render_listing(rows, summary, lambda text: for_terminal(text, one_line=True)).split("\n\n", 1)[1])
    print(f"\n{len(entries)} pairs in {wall:.1f} s wall ({len(entries) / wall:.2f} pairs/s), -j {args.jobs}; "
          f"load average after: {os.getloadavg()[0]:.2f}")
    if args.every > 1:
        print(f"the whole census ({len(everything)} pairs) extrapolates to {wall * args.every / 60:.1f} min")
    slowest = sorted(statuses.values(), key=lambda s: -s.seconds)[:10]
    print("slowest pairs: " + ", ".join(f"{s.subject} {s.seconds:.1f}s" for s in slowest))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"summary": summary.to_dict(), "wall_s": wall, "jobs": args.jobs,
                       "pairs": {s: {"status": st.status, "cause": st.cause, "seconds": st.seconds, "ops": list(st.ops)}
                                 for s, st in statuses.items()}}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
