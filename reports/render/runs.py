"""The `runs` table."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from op_db.records import STATUS_ORDER


def runs_table(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return "No runs yet."
    statuses = [s.value for s in STATUS_ORDER if any(r["counts"].get(s.value) for r in runs)]
    headers = ["id", "started", "backend", "device", "simulated", "status", "versions", *statuses]
    body = [
        [
            run["id"],
            (run.get("started") or "")[:19].replace("T", " "),
            run["backend"],
            run["device"],
            "yes" if run["simulated"] else "no",
            run["status"],
            versions_text(run),
            *(run["counts"].get(s, 0) for s in statuses),
        ]
        for run in runs
    ]
    return tabulate(body, headers=headers, disable_numparse=True)


def versions_text(run: dict[str, Any]) -> str:
    found = {"torch": run.get("torch_version"), "backend": run.get("backend_version"),
             "transformers": run.get("transformers_version")}
    found.update(run.get("versions") or {})
    return ", ".join(f"{k} {v}" for k, v in found.items() if v) or "-"
