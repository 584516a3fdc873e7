"""The whole default dist suite at world size 2 on sim (target: under a minute on 2 cores, issue 43).

    python benchmarks/dist_suite.py [--device sim] [--world-size 2] [--jobs 1] [--dtype float32,bfloat16]
                                    [--parts collectives,parity,streams] [--ops mul,sum]
                                    [--ways 'fsdp2_tp,pp_fsdp']

Runs the selected dist items (default: collectives, parity, streams; `--ops` adds DTensor
OpInfo) through the world runner as `neuron-check dist` does, and prints the wall time, items
per second, the machine's load average around the run, the counts per status and the slowest
items. The 2-D mesh ways need `--world-size 4` (opt-in: docs/dist.md has the measured cost).
"""

from __future__ import annotations

import argparse
import collections
import os
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="sim", help="sim or cpu (a host device)")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--parts", default="collectives,parity,streams")
    parser.add_argument("--ops", default="", help="OpInfo names/globs for the DTensor part")
    parser.add_argument("--ways", default="", help="parity ways or globs (default: all)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--dtype", default="float32,bfloat16")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()

    from conformance import backends
    from conformance.engine.config import RunConfig
    from conformance.dist.plan import DistOptions, plan
    from conformance.dist.world import WorldExecutor, WorldSpec

    adapter = backends.get(args.device).init()
    options = DistOptions(world_size=args.world_size, dtypes=tuple(args.dtype.split(",")),
                          parts=tuple(filter(None, args.parts.split(","))), ops=tuple(filter(None, args.ops.split(","))),
                          ways=tuple(filter(None, args.ways.split(","))))
    items = plan(options)
    config = RunConfig(backend=args.device, device=args.device, jobs=args.jobs, timeout_s=args.timeout,
                       suite_options=options)
    results = []
    load_before = os.getloadavg()[0]  # the machine may be shared: a figure means little without it
    started = time.perf_counter()
    WorldExecutor(WorldSpec.for_config(config, adapter)).execute(items, config, results.append)
    wall = time.perf_counter() - started
    print(f"dist suite on {args.device}, world size {args.world_size}, {args.jobs} world(s): {len(results)} items in {wall:.1f} s "
          f"({len(results) / wall:.2f} items/s; target for the default suite: under 60 s)")
    print(f"  on {os.cpu_count()} cores, load average {load_before:.1f} before and {os.getloadavg()[0]:.1f} after")
    for status, count in collections.Counter(r.status.value for r in results).most_common():
        print(f"  {status:12} {count}")
    print("slowest items:")
    for r in sorted(results, key=lambda r: -r.duration_s)[:5]:
        print(f"  {r.duration_s:7.2f} s  {r.subject} {r.variant} {r.dtype} {r.status.value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
