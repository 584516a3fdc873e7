"""How long reports, the gate and the dashboard take on nightly-sized stores.

Prints figures; asserts nothing. Usage:
    python benchmarks/report_speed.py [--items 20000] [--runs 5]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from op_db.records import STATUS_ORDER
from op_db.sample import result, write_sample_run
from op_db.store import Store, open_for_reading
from reports.dashboard import build_dashboard
from reports.export import render
from reports.gate import evaluate
from reports.model import report_from_store

DTYPES = ("float32", "bfloat16", "float16", "float64")


def synthetic(items: int, seed: int) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(items // (len(DTYPES) * 2)):
        for dtype in DTYPES:
            for mode in ("eager", "compile"):
                status = rng.choices(STATUS_ORDER, weights=(80, 4, 4, 6, 2, 1, 1, 1, 1))[0]
                out.append(result(f"op{i}", dtype, status, mode=mode, aten_ops={f"aten.op{i}.default": 2},
                                  failing_op=f"aten.op{i % 50}.default" if status.value != "PASS" else None,
                                  message="x" * 80))
    return out


def timed(label: str, fn):
    start = time.perf_counter()
    value = fn()
    print(f"{label:<40} {time.perf_counter() - start:8.2f} s")
    return value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        with Store.open(db) as store:
            for n in range(args.runs):
                rows = synthetic(args.items, n)
                timed(f"write run {n + 1} ({len(rows)} results, 1 txn each)",
                      lambda: write_sample_run(store, rows, started=f"2026-01-{n + 1:02d}T00:00:00+00:00"))
        with open_for_reading(db) as store:
            report = timed("build report model (latest)", lambda: report_from_store(store, "latest"))
            before = report_from_store(store, 1)
        for fmt in ("table", "html", "json", "junit", "parquet"):
            data = timed(f"render {fmt}", lambda: render(report, fmt))
            print(f"{'':<40} {len(data) / 1e6:8.1f} MB")
        timed("gate: latest vs run 1", lambda: evaluate(report, before))
        timed(f"dashboard ({args.runs} runs)", lambda: build_dashboard([db], Path(tmp) / "site"))


if __name__ == "__main__":
    main()
