"""The `coverage` table: registration kinds per aten op."""

from __future__ import annotations

from tabulate import tabulate


def coverage_table(device: str, dispatch_key: str, simulated: bool,
                   counts: dict[str, int], rows: list[tuple[str, str]], profile_name: str | None = None) -> str:
    title = f"dispatcher coverage of {device} (dispatch key {dispatch_key})"
    if simulated:
        title += " [SIMULATED: the sim stand-in device]"
    if profile_name is not None:
        title += f"\nsim profile {profile_name!r}: its unsupported ops are listed as missing, its fallback ops as fallback"
    parts = [title, tabulate(sorted(counts.items(), key=lambda kv: -kv[1]), headers=["kind", "aten ops"])]
    if rows:
        parts.append(tabulate(rows, headers=["aten overload", "kind"]))
    return "\n\n".join(parts)
