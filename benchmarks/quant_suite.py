"""The whole fault-free quant suite on sim: wall time and statuses (the closing note's figures),
and the census docs/quant.md shows: per recipe, its items' statuses and the reason of every
non-PASS.

    python benchmarks/quant_suite.py [--dtype bf16,fp32] [-j 1] [--markdown]
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="bfloat16,float32")
    parser.add_argument("-j", default="1")
    parser.add_argument("--markdown", action="store_true", help="print the census as docs/quant.md's table")
    args = parser.parse_args()
    db = os.path.join(tempfile.mkdtemp(), "quant.db")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "from porting_cli.cli.app import console_main; console_main()", "quant", "--device", "sim", "--grad", "--dtype",
                    args.dtype, "-j", args.j, "--db", db], check=False, capture_output=True)
    elapsed = time.perf_counter() - start
    from op_db.store import Store

    with Store.open(db) as store:
        results = store.results(store.resolve_run("latest"))
    by_status = collections.Counter(r.status.value for r in results)
    print(f"quant suite on sim: {len(results)} items in {elapsed:.1f} s (-j {args.j}, dtypes {args.dtype})")
    for status, count in sorted(by_status.items()):
        print(f"  {status:12s} {count}")
    if args.markdown:
        print_census(results)
        return
    reasons = collections.Counter((r.status.value, r.subject, r.message) for r in results if r.status.value != "PASS")
    for (status, subject, message), count in sorted(reasons.items()):
        print(f"  {status} x{count} {subject}: {message}")


def print_census(results) -> None:
    """One row per recipe, in plan order: its statuses and each non-PASS reason with its targets."""
    from conformance.quant.plan import RECIPES

    print("\n| recipe | items | statuses | why not PASS (targets) |\n|---|---|---|---|")
    for recipe in RECIPES:
        mine = [r for r in results if r.subject == recipe]
        if not mine:
            continue
        statuses = collections.Counter(r.status.value for r in mine)
        why: dict[str, set[str]] = collections.defaultdict(set)
        for r in mine:
            if r.status.value != "PASS":
                why[f"{r.status.value}: {r.message}"].add(r.variant)
        text = "; ".join(f"{reason} ({_targets(recipe, variants)})" for reason, variants in sorted(why.items())) or "-"
        counts = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
        print(f"| `{recipe}` | {len(mine)} | {counts} | {text.replace('|', '/')} |")


def _targets(recipe: str, variants: set[str]) -> str:
    from conformance.quant.plan import targets_of

    known = targets_of(recipe)
    return "every target" if variants == set(known) else ", ".join(v for v in known if v in variants)


if __name__ == "__main__":
    main()
