"""The `coverage` table: registration kinds per aten op."""

from __future__ import annotations

from tabulate import tabulate


def coverage_table(device: str, dispatch_key: str, simulated: bool,
                   counts: dict[str, int], rows: list[tuple[str, str]]) -> str:
    title = f"dispatcher coverage of {device} (dispatch key {dispatch_key})"
    if simulated:
        title += " [SIMULATED: the sim stand-in device]"
    parts = [title, tabulate(sorted(counts.items(), key=lambda kv: -kv[1]), headers=["kind", "aten ops"])]
    if rows:
        parts.append(tabulate(rows, headers=["aten overload", "kind"]))
    return "\n\n".join(parts)
