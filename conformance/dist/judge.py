"""One rank's verdict on one item: reference first, then the device, then the numerics rule.

Statuses come from conformance/outcome.py (exceptions) and conformance/numerics/
(comparisons), as in every suite; `worst` merges the ranks' verdicts into the item's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from conformance.engine.item_log import LOG_LIMIT
from conformance.numerics import compare
from conformance.outcome import classify_exception, describe_exception
from op_db.records import Result, Status, WorkItem, shorten

# Which rank's verdict speaks for the item: a dead or hung rank first, then a failed reference
# (the item then says nothing about the backend), then the device's own failures.
RANK_SEVERITY = (Status.CRASH, Status.TIMEOUT, Status.REF_ERROR, Status.ERROR, Status.UNSUPPORTED,
                 Status.MISMATCH, Status.FALLBACK, Status.SKIP, Status.PASS)


def judge(item: WorkItem, adapter: Any, reference: Callable[[], Any], device: Callable[[], Any],
          oracle: Callable[[], Any] | None = None, *, exact: bool = False) -> Result:
    """Run `reference` (CPU), then `device` under the adapter's fallback tracking, and compare."""
    started = time.perf_counter()
    try:
        ref = reference()
    except Exception as exc:  # noqa: BLE001 - the CPU itself failed: says nothing about the backend
        return Result.for_item(item, Status.REF_ERROR, message=shorten(describe_exception(exc)),
                               duration_s=time.perf_counter() - started)
    hi = oracle() if oracle is not None else None
    with adapter.track_fallbacks() as fallbacks:
        try:
            dev = device()
            adapter.synchronize()
        except Exception as exc:  # noqa: BLE001 - the backend failed this collective or step
            return Result.for_item(item, classify_exception(exc), samples=1, message=shorten(describe_exception(exc)),
                                   duration_s=time.perf_counter() - started)
    return from_comparison(item, compare(dev, ref, hi, exact=exact), sorted(fallbacks.ops),
                           time.perf_counter() - started)


def from_comparison(item: WorkItem, comparison: Any, fallback_ops: list[str], duration_s: float,
                    **fields: Any) -> Result:
    if not comparison.ok:
        status = Status.MISMATCH
    else:
        status = Status.FALLBACK if fallback_ops else Status.PASS
    return Result.for_item(
        item, status, samples=1, samples_passed=int(comparison.ok), max_abs_err=comparison.max_abs_err,
        max_rel_err=comparison.max_rel_err, err_ratio=comparison.err_ratio, check="numerics",
        message=shorten(comparison.reason) or None, fallback_ops=fallback_ops, duration_s=duration_s,
        first_failure=f"0: {shorten(comparison.reason, 300)}" if not comparison.ok else None, **fields)


def worst(results: dict[int, Result]) -> Result:
    """The item's result over all ranks: the most severe rank's, saying which rank it was."""
    rank, chosen = min(results.items(), key=lambda pair: (RANK_SEVERITY.index(pair[1].status), pair[0]))
    merged = Result.from_dict(chosen.to_dict())
    merged.extra = {**chosen.extra, "rank": rank, "ranks": {str(r): res.status.value for r, res in sorted(results.items())}}
    logs = [f"[rank {r}] {line}" for r, res in sorted(results.items()) for line in res.extra.get("log", "").splitlines()]
    merged.extra.pop("log", None)
    if logs:
        merged.extra["log"] = shorten("\n".join(logs), 2 * LOG_LIMIT)
    merged.duration_s = max(r.duration_s for r in results.values())
    if merged.status not in (Status.PASS, Status.SKIP) and merged.message:
        merged.message = shorten(f"rank {rank}: {merged.message}")
    return merged
