"""A vendor's claims against what the run measured: one verdict per claimed row.

Each row of a claims table (`reports.claims_table`) is mapped to the run's
measured items: an API through the OpInfo entries it names
(`reports.api_map`) to the items of those subjects; an aten overload through
the items that recorded it (in `aten_ops`, `fallback_ops` or as `failing_op`).

Per dtype the measured status is the worst judged status of the row's items
(SKIP and REF_ERROR say nothing about the backend and count only when nothing
else was measured). Verdicts (a closed set, `VERDICTS`):

| claim | measured | verdict |
|---|---|---|
| any | nothing judged | untested |
| Y | a dtype fails | claimed-but-fails |
| Y | no failure, some dtype falls back | native-claimed-but-fallback |
| CPU_FALLBACK | a dtype fails | claimed-but-fails |
| CPU_FALLBACK | every dtype native (PASS) | fallback-claimed-but-native |
| N | a dtype fully works (PASS or FALLBACK) | works-but-claimed-unsupported |
| otherwise | | agree |

An aten overload's status for an item: the item's status when the overload
is its failing op; FALLBACK when it ran through the CPU fallback; PASS when
the item worked; an item that failed on another op says nothing about it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Callable, Iterable

from op_db.records import FAILING, WORKING, Result, Status
from reports.claims_table import FALLBACK, NATIVE, UNSUPPORTED, ClaimRow

AGREE = "agree"
CLAIMED_BUT_FAILS = "claimed-but-fails"
WORKS_BUT_CLAIMED_UNSUPPORTED = "works-but-claimed-unsupported"
FALLBACK_CLAIMED_BUT_NATIVE = "fallback-claimed-but-native"
NATIVE_CLAIMED_BUT_FALLBACK = "native-claimed-but-fallback"
UNTESTED = "untested"
VERDICTS = (AGREE, CLAIMED_BUT_FAILS, WORKS_BUT_CLAIMED_UNSUPPORTED, FALLBACK_CLAIMED_BUT_NATIVE,
            NATIVE_CLAIMED_BUT_FALLBACK, UNTESTED)
OPINFO_SUITE = "opinfo"

# Worst first: the status a dtype shows when its items disagree.
SEVERITY = (Status.CRASH, Status.TIMEOUT, Status.ERROR, Status.MISMATCH, Status.UNSUPPORTED,
            Status.FALLBACK, Status.PASS, Status.REF_ERROR, Status.SKIP)
_UNJUDGED = frozenset({Status.SKIP, Status.REF_ERROR})


def is_aten(name: str) -> bool:
    return name.startswith(("aten::", "aten.", "torch.ops.aten."))


def aten_overload(name: str) -> str:
    """'aten::add.Tensor' / 'torch.ops.aten.add.Tensor' -> 'aten.add.Tensor'; 'aten::add' -> 'aten.add'."""
    name = name.strip().removeprefix("torch.ops.")
    return name.replace("::", ".", 1)


def _matches_overload(recorded: str, claimed: str) -> bool:
    """A claim without an overload (`aten.add`) covers every overload of the op."""
    return recorded == claimed or (claimed.count(".") == 1 and recorded.startswith(claimed + "."))


def aten_status(result: Result, overload: str) -> Status | None:
    """What one item says about one aten overload; None when it says nothing."""
    if result.failing_op and _matches_overload(result.failing_op, overload):
        return result.status
    if any(_matches_overload(op, overload) for op in result.fallback_ops):
        return Status.FALLBACK if result.status in WORKING else result.status
    if any(_matches_overload(op, overload) for op in result.aten_ops):
        if result.status in WORKING:
            return Status.PASS
        if result.status in _UNJUDGED:
            return result.status
    return None


def worst(statuses: Iterable[Status]) -> Status:
    found = set(statuses)
    judged = found - _UNJUDGED
    return next(s for s in SEVERITY if s in (judged or found))


def verdict(claim: str, measured: dict[str, Status]) -> str:
    judged = [s for s in measured.values() if s not in _UNJUDGED]
    if not judged:
        return UNTESTED
    failing = any(s in FAILING for s in judged)
    if claim == NATIVE:
        if failing:
            return CLAIMED_BUT_FAILS
        return NATIVE_CLAIMED_BUT_FALLBACK if Status.FALLBACK in judged else AGREE
    if claim == FALLBACK:
        if failing:
            return CLAIMED_BUT_FAILS
        return AGREE if Status.FALLBACK in judged else FALLBACK_CLAIMED_BUT_NATIVE
    if claim == UNSUPPORTED:
        return WORKS_BUT_CLAIMED_UNSUPPORTED if any(s in WORKING for s in judged) else AGREE
    raise ValueError(f"unknown claim {claim!r}")


def judge_claims(results: list[Result], rows: list[ClaimRow],
                 opinfos_of: Callable[[str], list[str]] | None = None) -> list[dict[str, Any]]:
    """One verdict row per claimed row. `opinfos_of` maps an API to OpInfo full names
    (default: the index built from PyTorch's op database, imported only if an API row needs it)."""
    by_subject: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        if r.suite == OPINFO_SUITE:
            by_subject[r.subject].append(r)
    judged = []
    for row in rows:
        per_dtype: dict[str, list[Status]] = defaultdict(list)
        items: list[str] = []
        subjects: list[str] = []
        for api in row.apis:
            if is_aten(api):
                overload = aten_overload(api)
                for r in results:
                    status = aten_status(r, overload)
                    if status is not None and _dtype_claimed(row, r.dtype):
                        per_dtype[r.dtype].append(status)
                        items.append(r.item.test_id)
                continue
            if opinfos_of is None:
                from reports.api_map import api_index

                opinfos_of = api_index().opinfos
            for subject in opinfos_of(api):
                for r in by_subject.get(subject, ()):
                    if _dtype_claimed(row, r.dtype):
                        per_dtype[r.dtype].append(r.status)
                        items.append(r.item.test_id)
                        if subject not in subjects:
                            subjects.append(subject)
        measured = {dtype: worst(statuses) for dtype, statuses in sorted(per_dtype.items())}
        judged.append({
            "op": row.label, "line": row.line, "claim": row.claim,
            "dtypes": list(row.dtypes) if row.dtypes else None, "limitations": row.limitations,
            "measured": {dtype: status.value for dtype, status in measured.items()},
            "verdict": verdict(row.claim, measured),
            "subjects": subjects, "items": sorted(set(items)),
        })
    return judged


def claims_section(source: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What `report --claims` adds under `sections.claims`: the table, verdict counts, rows."""
    counts = Counter(r["verdict"] for r in rows)
    return {"source": source, "verdicts": {v: counts.get(v, 0) for v in VERDICTS}, "rows": rows}


def attach_claims(report: Any, source: str, rows: list[dict[str, Any]]) -> None:
    """Put the verdicts into the report's claims section, beside the suite's dtype claims."""
    report.claims.update(claims_section(source, rows))


def disagreements(report: Any, verdicts: tuple[str, ...] = (CLAIMED_BUT_FAILS,)) -> list[dict[str, Any]]:
    """Claimed rows of a report with one of `verdicts` (the gate's --fail-on-claims)."""
    return [r for r in report.claims.get("rows") or () if r["verdict"] in verdicts]


def text_rows(report: Any) -> tuple[list[list[Any]], list[str]] | None:
    """The claims section as table rows for the text and Markdown renderers; None without claims."""
    rows = report.claims.get("rows")
    if rows is None:
        return None
    body = [[r["line"], r["op"], r["claim"], ", ".join(f"{d} {s}" for d, s in r["measured"].items()) or "-",
             r["verdict"], r["limitations"] or ""] for r in rows]
    return body, ["line", "op", "claim", "measured", "verdict", "limitations"]


def _dtype_claimed(row: ClaimRow, dtype: str) -> bool:
    return row.dtypes is None or dtype in row.dtypes


def apply_claims_table(report: Any, path: str) -> list[dict[str, Any]]:
    """Read the claims table at `path`, judge it against `report`, attach the section; the rows."""
    from reports.claims_table import read_claims

    rows = judge_claims(report.results, read_claims(path))
    attach_claims(report, str(path), rows)
    return rows
