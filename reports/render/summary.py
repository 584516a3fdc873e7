"""The end-of-run summary of `neuron-check ops` (and any suite): counts and pass rates."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from tabulate import tabulate

from op_db.records import STATUS_ORDER, WORKING, Result, Status

# Statuses that say nothing about the backend and are left out of pass rates.
NEUTRAL = frozenset({Status.SKIP, Status.REF_ERROR})


def pass_rate(results: list[Result]) -> float | None:
    """Share of items that worked (PASS or FALLBACK) among those that say something about the backend."""
    judged = [r for r in results if r.status not in NEUTRAL]
    if not judged:
        return None
    return sum(r.status in WORKING for r in judged) / len(judged)


def summary_table(results: Iterable[Result], *, run_id: int | None = None, device: str | None = None,
                  simulated: bool = False, interrupted: bool = False) -> str:
    """Counts per status, then pass rate per dtype (PASS+FALLBACK over items not SKIP/REF_ERROR)."""
    results = list(results)
    counts = Counter(r.status for r in results)
    title = "run" + (f" {run_id}" if run_id is not None else "")
    if device:
        title += f" on {device}"
    if simulated:
        title += " (simulated)"
    if interrupted:
        title += " -- interrupted, resume with --resume " + str(run_id)
    status_rows = [[s.value, counts[s]] for s in STATUS_ORDER if counts[s]]
    status_rows.append(["total", len(results)])
    by_dtype: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        by_dtype[r.dtype].append(r)
    dtype_rows = []
    for dtype in sorted(by_dtype):
        rate = pass_rate(by_dtype[dtype])
        group = by_dtype[dtype]
        dtype_rows.append([dtype, len(group), sum(r.status in WORKING for r in group),
                           "-" if rate is None else f"{rate:.1%}"])
    parts = [title, tabulate(status_rows, headers=["status", "items"])]
    if dtype_rows:
        parts.append(tabulate(dtype_rows, headers=["dtype", "items", "working", "pass rate"]))
    return "\n\n".join(parts)
