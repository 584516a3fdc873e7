"""The `devices` table."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate


def devices_table(rows: list[dict[str, Any]]) -> str:
    headers = ["device", "available", "count", "versions", "dispatch key", "compile backend", "simulated"]
    body = [
        [
            row["name"],
            "yes" if row["available"] else "no",
            row["device_count"],
            ", ".join(f"{k} {v}" for k, v in row["versions"].items()) or "-",
            row["dispatch_key"],
            row["compile_backend"],
            "yes" if row["simulated"] else "no",
        ]
        for row in rows
    ]
    return tabulate(body, headers=headers)
