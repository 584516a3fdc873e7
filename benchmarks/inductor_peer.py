"""Peer check: our CPU compile-mode results against PyTorch's own expected failures.

PyTorch's test/inductor/test_torchinductor_opinfo.py keeps, by hand, the OpInfo ops that
Inductor is expected to fail on the CPU (`inductor_expected_failures_single_sample["cpu"]`)
and those it skips (`inductor_skips["cpu"]`). Its method: the first sample of each op,
forward, Inductor with `implicit_fallbacks=False`, compared with eager for equality. Ours,
run the same way:

    neuron-check ops --device cpu --mode compile --dtype fp32 --max-samples 1 \\
        --compile-options '{"implicit_fallbacks": false}' --jobs 2 --db peer.db
    python benchmarks/inductor_peer.py peer.db

prints where the two agree, where PyTorch expects a failure we see pass, and where we see a
failure PyTorch does not list, with our message for each. It reads a partial run as well
and says how much of the database it covers.

The lists below are facts read from pytorch/pytorch at commit a75d35a521f5 (float32 entries
only; OpInfo full names, a variant joined with a dot).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PEER_SOURCE = "pytorch/pytorch test/inductor/test_torchinductor_opinfo.py @ a75d35a521f5"
EXPECTED_FAILURES_CPU_FP32 = frozenset({
    "_upsample_bilinear2d_aa", "bernoulli", "cholesky", "masked_scatter", "multinomial",
    "nn.functional.rrelu", "nn.functional.triplet_margin_with_distance_loss", "nonzero_static",
    "normal.in_place", "normal.number_mean", "rand_like", "randint", "randint_like", "randn_like",
    "sparse.mm.reduce", "sparse.sampled_addmm", "to_sparse",
})
SKIPS_CPU_FP32 = frozenset({"linalg.ldl_factor"})  # "flaky"
WORKING = ("PASS", "FALLBACK", "SKIP")


NOTHING_COMPILED = "PyTorch expects a failure, we see nothing compiled (every call ran eagerly)"


def compare(results: dict[str, tuple[str, str, int]]) -> dict[str, list[tuple[str, str, str]]]:
    """results: OpInfo name -> (status, message, graphs compiled) of one fp32 forward compile run.
    An item that compiled no graph ran eagerly after graph breaks: where PyTorch's harness
    demands a full graph that is a failure, so it is told apart from a compiled pass."""
    groups: dict[str, list[tuple[str, str, str]]] = {
        "agree: both fail": [], NOTHING_COMPILED: [], "agree: both pass": [],
        "PyTorch expects a failure, we see a pass": [], "we see a failure PyTorch does not list": [],
        "PyTorch skips": [],
    }
    for name, (status, message, graphs) in sorted(results.items()):
        listed, failed = name in EXPECTED_FAILURES_CPU_FP32, status not in WORKING
        if name in SKIPS_CPU_FP32:
            key = "PyTorch skips"
        elif listed and failed:
            key = "agree: both fail"
        elif listed and not graphs:
            key = NOTHING_COMPILED
        elif listed:
            key = "PyTorch expects a failure, we see a pass"
        elif failed:
            key = "we see a failure PyTorch does not list"
        else:
            key = "agree: both pass"
        groups[key].append((name, status, (message or "").replace("\n", " ")[:160]))
    return groups


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", help="database of a `--device cpu --mode compile --dtype fp32 --max-samples 1` run")
    parser.add_argument("--run", type=int, default=None, help="run id (default: the latest)")
    args = parser.parse_args(argv)

    from op_db.store import open_for_reading

    with open_for_reading(args.db) as store:
        run_id = store.resolve_run(args.run if args.run is not None else "latest")
        rows = [r for r in store.results(run_id, suite="opinfo") if r.dtype == "float32"
                and r.mode == "compile" and r.variant == "forward"]
    results = {}
    for r in rows:
        facts = r.compile or {}
        why = r.message or "; ".join(facts.get("break_reasons", [])[:1])  # a pass says why it broke, if it did
        results[r.subject] = (r.status.value, why, facts.get("graphs", 0))
    groups = compare(results)
    seen_listed = EXPECTED_FAILURES_CPU_FP32 & set(results)
    print(f"peer: {PEER_SOURCE}")
    print(f"run {run_id}: {len(results)} fp32 compile items; PyTorch's CPU fp32 list has "
          f"{len(EXPECTED_FAILURES_CPU_FP32)} entries, {len(seen_listed)} of them in this run")
    for key, entries in groups.items():
        print(f"\n{key}: {len(entries)}")
        if key == "agree: both pass":
            continue
        for name, status, message in entries:
            print(f"  {name:50s} {status:12s} {message}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
