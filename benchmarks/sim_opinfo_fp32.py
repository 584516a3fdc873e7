"""Sweep PyTorch's OpInfo database, float32 forward, on the `sim` device against CPU.

    python benchmarks/sim_opinfo_fp32.py [--max-samples N] [--only NAME ...] [--chunk K]

Each chunk of ops runs in a child process, so an op that kills its process is recorded as
CRASH and the sweep goes on. Prints the pass count and the failures grouped by category.
With a fault-free profile every failure is a bug in `conformance.sim` (or an op whose output
is undefined, e.g. `empty`).
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time


def _child(start: int, stop: int, max_samples: int, only: list[str], on: str) -> None:
    import warnings

    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    import conformance.sim as sim

    warnings.simplefilter("ignore")
    sim.register()
    for idx in range(start, min(stop, len(op_db))):
        op = op_db[idx]
        full = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if only and full not in only and op.name not in only:
            continue
        print(json.dumps({"start": idx, "op": full}), flush=True)
        print(json.dumps({"idx": idx, "op": full, **_run_op(torch, sim, op, max_samples, on)}), flush=True)


# Ops whose output is uninitialised memory: nothing to compare.
UNDEFINED = {"empty", "empty_like", "empty_permuted", "empty_strided", "new_empty",
             "new_empty_strided"}


def _run_op(torch, sim, op, max_samples, on):
    if torch.float32 not in op.supported_dtypes("cpu"):
        return {"status": "SKIP", "why": "no float32"}
    if op.name in UNDEFINED:
        return {"status": "SKIP", "why": "undefined output"}
    try:
        torch.manual_seed(0)
        samples = list(op.sample_inputs(on, torch.float32, requires_grad=False))[:max_samples]
    except Exception as exc:  # noqa: BLE001
        return {"status": "SKIP", "why": f"samples: {type(exc).__name__}"}
    if not samples:
        return {"status": "SKIP", "why": "no samples"}
    to_sim = lambda t: t.to("sim") if isinstance(t, torch.Tensor) else t  # noqa: E731
    to_cpu = lambda t: t.to("cpu") if isinstance(t, torch.Tensor) else t  # noqa: E731
    from torch.utils._pytree import tree_map

    for i, s in enumerate(samples):
        # Samples made on CPU are moved to sim (the DESIGN data flow); samples made on sim
        # (as PyTorch's device tests make them) are moved to CPU for the reference.
        try:
            s = s if on == "cpu" else s.transform(to_cpu)
            torch.manual_seed(1234)
            ref = tree_map(to_cpu, op(s.input, *s.args, **s.kwargs))  # factories may still say sim
        except Exception:  # noqa: BLE001
            continue  # REF_ERROR: says nothing about sim
        try:
            ds = s.transform(to_sim) if on == "cpu" else samples[i]
            torch.manual_seed(1234)
            out = tree_map(to_cpu, op(ds.input, *ds.args, **ds.kwargs))
        except Exception as exc:  # noqa: BLE001
            msg = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
            return {"status": "ERROR", "sample": i, "why": f"{type(exc).__name__}: {msg}"}
        try:
            torch.testing.assert_close(out, ref, equal_nan=True, check_device=True)
        except Exception as exc:  # noqa: BLE001
            msg = str(exc).strip().splitlines()[0][:160]
            return {"status": "MISMATCH", "sample": i, "why": msg}
    return {"status": "PASS"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-samples", type=int, default=8)
    ap.add_argument("--chunk", type=int, default=120)
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--child", nargs=2, type=int)
    ap.add_argument("--json", help="write per-op results here")
    ap.add_argument("--samples-on", choices=["cpu", "sim"], default="cpu",
                    help="make samples on CPU and move them (default) or make them on sim")
    a = ap.parse_args()
    if a.child:
        _child(a.child[0], a.child[1], a.max_samples, a.only, a.samples_on)
        return
    from torch.testing._internal.common_methods_invocations import op_db

    total, results, t0 = len(op_db), {}, time.time()
    start = 0
    while start < total:
        stop = min(start + a.chunk, total)
        cmd = [sys.executable, __file__, "--child", str(start), str(stop),
               "--max-samples", str(a.max_samples), "--samples-on", a.samples_on, "--only", *a.only]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
            lines, rc = p.stdout.splitlines(), p.returncode
        except subprocess.TimeoutExpired as exc:
            lines, rc = (exc.stdout or b"").decode().splitlines(), "timeout"
        last_start = None
        for line in lines:
            if not line.startswith("{"):
                continue
            rec = json.loads(line)
            if "start" in rec:
                last_start = rec
            else:
                results[rec["op"]] = rec
                last_start = None
        if last_start is not None:  # the child died inside this op
            kind = "TIMEOUT" if rc == "timeout" else "CRASH"
            results[last_start["op"]] = {"status": kind, "why": f"rc={rc}"}
            start = last_start["start"] + 1
        else:
            start = stop
        print(f"  {start}/{total} ops, {time.time() - t0:.0f}s", file=sys.stderr, flush=True)

    counts = collections.Counter(r["status"] for r in results.values())
    ran = {k: v for k, v in results.items() if v["status"] != "SKIP"}
    print(f"PASS {counts['PASS']} / {len(ran)} run ({len(results)} OpInfos, {counts['SKIP']} skipped)")
    print(dict(counts))
    cats = collections.defaultdict(list)
    for name, r in sorted(ran.items()):
        if r["status"] != "PASS":
            cats[f"{r['status']}: {r.get('why', '')[:110]}"].append(name)
    for cat, names in sorted(cats.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(names):4d}  {cat}\n      {', '.join(names[:12])}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
