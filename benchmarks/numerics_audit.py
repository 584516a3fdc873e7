"""Fault-free audit of every suite on sim: does a correct backend come out clean? (issue 29)

    python benchmarks/numerics_audit.py --out /tmp/audit                 run every sweep, then the table
    python benchmarks/numerics_audit.py --out /tmp/audit --suites ops,dist
    python benchmarks/numerics_audit.py --out /tmp/audit --report-only   the table of sweeps already run

Each sweep is the ordinary command line (one store per sweep, DIR/<sweep>.db, -j 2), run on
the fault-free `sim`: a correct backend, since every aten op there is the CPU's own kernel.
Printed: per sweep, the count of each status, then every item that is not PASS or SKIP with
its message, so each can be checked to be one a correct backend deserves (an UNSUPPORTED the
device truly lacks; a REF_ERROR that fails on the CPU too). The models sweep is a slice of the
zoo (MODEL_SLICE, all their tasks): the whole zoo is ~2,000 (type, task) pairs.
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

MODEL_SLICE = ("llama,gpt2,bert,t5,vit,whisper,mistral,qwen2,mixtral,clip,bart,wav2vec2,detr,resnet,roberta,"
               "convnext,swin,mamba,gemma,phi3")
SWEEPS = {  # name -> arguments after `neuron-check`
    "ops": ["ops", "--dtype", "fp32,bf16,fp16", "--grad"],
    "ops-compile": ["ops", "--dtype", "fp32", "--mode", "compile"],
    "ops-fp8": ["ops", "--dtype", "fp8"],
    "models": ["models", "--arch", MODEL_SLICE, "--dtype", "fp32,bf16", "--grad"],
    "dist": ["dist"],
}
STATUSES = ("PASS", "FALLBACK", "MISMATCH", "ERROR", "CRASH", "TIMEOUT", "UNSUPPORTED", "SKIP", "REF_ERROR")


def run_sweep(name: str, db: Path, jobs: int) -> float:
    command = [sys.executable, "-m", "porting_cli", *SWEEPS[name], "--device", "sim", "--db", str(db)]
    if name != "dist":
        command += ["-j", str(jobs)]
    started = time.perf_counter()
    subprocess.run(command, check=False, stdout=subprocess.DEVNULL, cwd=Path(__file__).resolve().parents[1])
    return time.perf_counter() - started


def latest_run(db: Path) -> tuple[dict[str, int], list[tuple]]:
    with sqlite3.connect(db) as con:
        (run,) = con.execute("select max(id) from runs").fetchone()
        counts = dict(con.execute("select status, count(*) from results where run_id = ? group by status", (run,)))
        others = con.execute(
            "select subject, variant, dtype, mode, status, message from results where run_id = ? "
            "and status not in ('PASS', 'SKIP') order by status, subject", (run,)).fetchall()
    return counts, others


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for one store per sweep")
    parser.add_argument("--suites", default=",".join(SWEEPS), help=f"comma list of {', '.join(SWEEPS)}")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--report-only", action="store_true", help="print the table of sweeps already in --out")
    args = parser.parse_args()
    names = [n.strip() for n in args.suites.split(",") if n.strip()]
    unknown = [n for n in names if n not in SWEEPS]
    if unknown:
        parser.error(f"unknown sweep(s) {', '.join(unknown)}; known: {', '.join(SWEEPS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    walls = {}
    for name in names:
        if not args.report_only:
            walls[name] = run_sweep(name, args.out / f"{name}.db", args.jobs)

    print("| sweep | items | " + " | ".join(STATUSES) + " |")
    print("|---|---:|" + "---:|" * len(STATUSES))
    details = []
    for name in names:
        db = args.out / f"{name}.db"
        if not db.exists():
            print(f"| {name} | not run | " + " | ".join("" for _ in STATUSES) + " |")
            continue
        counts, others = latest_run(db)
        print(f"| {name} | {sum(counts.values())} | " + " | ".join(str(counts.get(s, 0)) for s in STATUSES) + " |")
        details += [(name, *row) for row in others]
    print("\nevery item that is neither PASS nor SKIP:")
    for name, subject, variant, dtype, mode, status, message in details:
        print(f"  {name}: {subject} {variant} {dtype} {mode}: {status}: {(message or '')[:200]}")
    for name, wall in walls.items():
        print(f"wall {name}: {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
