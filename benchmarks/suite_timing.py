"""Shared by the suite benchmarks: run one neuron-check suite command into a fresh database and
return its wall time, exit status and stored results."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed_run(arguments: list[str]) -> tuple[float, int, list]:
    """`python -m porting_cli ARGUMENTS --db TMP` from the repository root: (wall s, exit, results)."""
    from op_db.store import Store

    with tempfile.TemporaryDirectory() as folder:
        db = os.path.join(folder, "bench.db")
        began = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "porting_cli", *arguments, "--db", db], cwd=REPO,
                              capture_output=True, text=True)
        wall = time.perf_counter() - began
        store = Store.open(db, readonly=True)
        try:
            return wall, done.returncode, store.results(store.resolve_run("latest"))
        finally:
            store.close()
