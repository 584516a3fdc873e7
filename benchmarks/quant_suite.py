"""The whole fault-free quant suite on sim: wall time and statuses (the closing note's figures).

    python benchmarks/quant_suite.py [--dtype bf16,fp32] [-j 1]
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
    reasons = collections.Counter((r.status.value, r.subject, r.message) for r in results if r.status.value != "PASS")
    for (status, subject, message), count in sorted(reasons.items()):
        print(f"  {status} x{count} {subject}: {message}")


if __name__ == "__main__":
    main()
