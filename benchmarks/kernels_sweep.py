"""Time the kernels suite on the example library (issue target: fp32/bf16/fp16, --grad, eager and
compile, at most 3 minutes on 2 cores), through the command as a user runs it.

    python benchmarks/kernels_sweep.py [--jobs 1] [--device sim]

Prints the wall time, the items and their statuses, and the slowest items.
"""

from __future__ import annotations

import argparse
from suite_timing import REPO, timed_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--device", default="sim")
    args = parser.parse_args()
    wall, code, results = timed_run(["kernels", str(REPO / "examples" / "kernels" / "target.py"),
                                     "--device", args.device, "--dtype", "fp32,bf16,fp16", "--grad",
                                     "--mode", "eager,compile", "--jobs", str(args.jobs)])
    statuses: dict[str, int] = {}
    for result in results:
        statuses[result.status.value] = statuses.get(result.status.value, 0) + 1
    print(f"kernels suite, example library, fp32/bf16/fp16, --grad, eager+compile, -j {args.jobs}: "
          f"{wall:.1f} s wall (exit {code}), {len(results)} items, {statuses}")
    print("slowest items:")
    for result in sorted(results, key=lambda r: -r.duration_s)[:8]:
        print(f"  {result.duration_s:6.2f} s  {result.item.test_id}")


if __name__ == "__main__":
    main()
