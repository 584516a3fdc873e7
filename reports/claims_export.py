"""The compatibility table a vendor should publish, written from a run's measurements.

One row per (PyTorch API, claim): the API is the public name of the OpInfo
entries the run measured (`reports.api_map`), and each dtype goes to the row
of what was measured for it: `Y` when every judged item passed natively,
`CPU_FALLBACK` when it worked with some op on the CPU fallback, `N` when an
item failed. The limitations column says what failed or fell back. Read back
with `report --claims` against the same run, every row agrees: the measured
statuses are gathered exactly as `reports.claims` gathers them.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from typing import Any, Callable

from op_db.records import FAILING, Result, Status
from reports.claims import OPINFO_SUITE, worst
from reports.claims_table import FALLBACK, NATIVE, UNSUPPORTED
from reports.sanitize import for_markdown, for_terminal

HEADERS = ("PyTorch API", "Status", "Dtypes", "Limitations")
_CLAIM_ORDER = (NATIVE, FALLBACK, UNSUPPORTED)


def claim_for(status: Status) -> str | None:
    if status in FAILING:
        return UNSUPPORTED
    if status == Status.FALLBACK:
        return FALLBACK
    if status == Status.PASS:
        return NATIVE
    return None  # SKIP / REF_ERROR: nothing to claim


def export_rows(results: list[Result], primary_api: Callable[[str], str] | None = None,
                opinfos_of: Callable[[str], list[str]] | None = None) -> list[dict[str, Any]]:
    """{api, claim, dtypes, limitations} rows, sorted by API then claim."""
    if primary_api is None or opinfos_of is None:
        from reports.api_map import api_index

        index = api_index()
        primary_api, opinfos_of = primary_api or index.primary_api, opinfos_of or index.opinfos
    by_subject: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        if r.suite == OPINFO_SUITE:
            by_subject[r.subject].append(r)
    rows = []
    for api in sorted({primary_api(subject) for subject in by_subject}):
        per_dtype: dict[str, list[Result]] = defaultdict(list)
        for subject in opinfos_of(api) or [s for s in by_subject if primary_api(s) == api]:
            for r in by_subject.get(subject, ()):
                per_dtype[r.dtype].append(r)
        by_claim: dict[str, list[str]] = defaultdict(list)
        notes: dict[str, list[str]] = defaultdict(list)
        for dtype, items in sorted(per_dtype.items()):
            status = worst(r.status for r in items)
            claim = claim_for(status)
            if claim is None:
                continue
            by_claim[claim].append(dtype)
            notes[claim].extend(_limitation(dtype, items, claim))
        for claim in _CLAIM_ORDER:
            if claim in by_claim:
                rows.append({"api": api, "claim": claim, "dtypes": by_claim[claim],
                             "limitations": "; ".join(dict.fromkeys(notes[claim]))})
    return rows


def render_export(rows: list[dict[str, Any]], fmt: str, run: dict[str, Any]) -> str:
    """The table as Markdown (`md`) or CSV (`csv`)."""
    table = [[r["api"], r["claim"], ", ".join(r["dtypes"]), r["limitations"]] for r in rows]
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(HEADERS)
        writer.writerows(table)
        return buffer.getvalue()
    simulated = " (SIMULATED: the sim stand-in device)" if run.get("simulated") else ""
    lines = [f"<!-- measured by neuron-check run {run.get('id')} on {_md_cell(run.get('device'))} "
             f"({_md_cell(run.get('backend'))}){simulated}, torch {_md_cell(run.get('torch_version') or '?')} -->", "",
             "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table]
    return "\n".join(lines) + "\n"


def _limitation(dtype: str, items: list[Result], claim: str) -> list[str]:
    if claim == UNSUPPORTED:
        failing = [r for r in items if r.status in FAILING]
        return [f"{dtype} {r.variant} {r.mode}: {r.status.value}" + (f" in {r.failing_op}" if r.failing_op else "")
                for r in failing]
    if claim == FALLBACK:
        ops = sorted({op for r in items for op in r.fallback_ops})
        return [f"{dtype}: {op} runs on the CPU fallback" for op in ops]
    return []


def _md_cell(text: Any) -> str:
    """One line, no bare `|`, and no markup: a published table may be rendered as HTML."""
    return for_markdown(for_terminal(text, one_line=True))
