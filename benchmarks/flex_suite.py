"""Time the whole flex attention suite on sim (every variant, fp32/bf16/fp16, --grad), through the
command as a user runs it, and print its statuses (issue #41: fault-free sim has no MISMATCH/ERROR).

    python benchmarks/flex_suite.py [--mode eager,compile] [--dynamic] [--jobs 1] [--profile FILE]
"""

from __future__ import annotations

import argparse
import collections

from suite_timing import timed_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="eager,compile")
    parser.add_argument("--dynamic", action="store_true")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--profile", help="a sim profile, e.g. one with \"flex_attention\": false")
    args = parser.parse_args()
    wall, code, results = timed_run(
        ["flex-attention", "--device", "sim", "--grad", "--dtype", "fp32,bf16,fp16", "--mode", args.mode,
         "--jobs", str(args.jobs), *(["--dynamic"] if args.dynamic else []),
         *(["--sim-profile", args.profile] if args.profile else [])])
    statuses = collections.Counter(r.status.value for r in results)
    by_mode = collections.defaultdict(float)
    for r in results:
        by_mode[r.item.mode] += r.duration_s
    print(f"flex attention suite on sim, fp32/bf16/fp16, --grad, --mode {args.mode}"
          f"{' --dynamic' if args.dynamic else ''}, -j {args.jobs}: {wall:.1f} s wall (exit {code}), "
          f"{len(results)} items, {dict(statuses)}; item time by mode: "
          + ", ".join(f"{m} {s:.1f} s" for m, s in by_mode.items()))


if __name__ == "__main__":
    main()
