"""Effort and verdict: findings grouped into change items that a lead engineer can sign.

A **change item** is one distinct change: the findings of one rule family in one file
(40 NVTX ranges in `train.py` are one item, not 40), except that a CUDA-only library is
one item for the whole project however many files import it. Ops missing on the target
are one item each, ops that ran through the CPU fallback one item together, and a script
that failed on the target outside of any op one more.

Each item gets the highest effort of its findings and a range of hours for that level
(``HOURS``): a planning figure for a person who knows the code, not a promise. The
project's effort is the sum of the ranges.

**blocked** means new code is needed: a finding of a rule marked ``blocks`` in the rule
table (a CUDA extension, a Triton kernel without fallback, a CUDA-only library with no
PyTorch replacement), an op UNSUPPORTED, ERROR or TIMEOUT on the target (live or predicted), or a
script that fails on the target. An API substitution never blocks, whatever its effort.
Every `blocked` verdict names the items that cause it.

Findings come from any number of files (each finding carries its path), so project mode
passes the findings of every file at once and gets one verdict and one effort.
Imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterable

from op_db.text import plural
from porting_cli.analysis.scan.rules import EFFORTS, RULES_BY_ID

#: (low, high) hours per item, by effort level
HOURS: dict[str, tuple[float, float]] = {"none": (0.0, 0.25), "low": (0.25, 1.0),
                                         "medium": (1.0, 4.0), "high": (4.0, 16.0)}
WHY: dict[str, str] = {
    "none": "mechanical; `neuron-check --fix` applies it, a person reviews the diff",
    "low": "a small manual change, the same at each site",
    "medium": "reworks a code path (an API with a different shape)",
    "high": "new code: a kernel or a replacement for a CUDA-only dependency",
}
#: rules whose item is the library, project-wide (named in the finding's message)
LIBRARY_RULES = frozenset({"NC703", "NC704", "NC705"})
BLOCKING_STATUSES = ("UNSUPPORTED", "ERROR", "TIMEOUT")  # TIMEOUT: the op hung on the target
LIBRARY_NAME = re.compile(r"`([^`]+)`")
VERDICTS = ("ready", "ready-with-fixes", "blocked")


@dataclasses.dataclass(frozen=True)
class ChangeItem:
    """One distinct change of the port."""

    id: str
    kind: str            # "finding", "op", "fallback" or "runtime"
    family: str          # the rule family, or the kind for op/runtime items
    path: str | None     # the file; None for a project-wide item
    rules: tuple[str, ...]
    sites: tuple[str, ...]  # "path:line" of its findings or ops (first ones)
    count: int           # findings or op uses in the item
    effort: str
    hours_low: float
    hours_high: float
    fixable: bool        # every finding of it is applied by --fix
    needs_change: bool   # not only informational findings
    blocks: bool
    rationale: str

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "rules": list(self.rules), "sites": list(self.sites)}


@dataclasses.dataclass(frozen=True)
class Effort:
    overall: str
    items: int
    hours_low: float
    hours_high: float
    findings: int
    fixable: int
    blocking_ops: int
    fallback_ops: int
    by_effort: dict[str, int]
    by_severity: dict[str, int]

    @property
    def hours(self) -> float:
        """The middle of the range (kept for readers of the older single figure)."""
        return round((self.hours_low + self.hours_high) / 2, 2)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "hours": self.hours}


@dataclasses.dataclass(frozen=True)
class Verdict:
    verdict: str
    reasons: list[str]
    blocked_by: list[str]  # ids of the items that make it blocked


def _level(efforts: Iterable[str]) -> str:
    return max(efforts, key=EFFORTS.index, default="none")


def _item_key(f: dict[str, Any]) -> tuple[str, str | None, str]:
    if f["rule"] in LIBRARY_RULES:  # the detail after the rule's message names the library
        rule = RULES_BY_ID.get(f["rule"])
        detail = f["message"][len(rule.message):] if rule and f["message"].startswith(rule.message) else f["message"]
        m = LIBRARY_NAME.search(detail)
        return (f["family"], None, m.group(1) if m else f["rule"])
    return (f["family"], f["path"], "")


def finding_items(findings: list[dict[str, Any]]) -> list[ChangeItem]:
    """Findings (of one file or many) grouped by rule family x file (libraries: per library)."""
    groups: dict[tuple[str, str | None, str], list[dict[str, Any]]] = {}
    for f in findings:
        groups.setdefault(_item_key(f), []).append(f)
    items = []
    for (family, path, library), group in groups.items():
        effort = _level(f["effort"] for f in group)
        low, high = HOURS[effort]
        rules = tuple(sorted({f["rule"] for f in group}))
        blocks = any(RULES_BY_ID[r].blocks for r in rules if r in RULES_BY_ID)
        lines = sorted({(f["path"], f["line"]) for f in group})
        where = f"`{library}` in {len({p for p, _ in lines})} file(s)" if library else path
        rationale = (f"{family} ({', '.join(rules)}), {len(group)} finding(s) on {len(lines)} line(s) "
                     f"in {where}: {WHY[effort]}")
        items.append(ChangeItem(
            id="", kind="finding", family=family, path=path, rules=rules,
            sites=tuple(f"{p}:{n}" for p, n in lines[:10]), count=len(group), effort=effort,
            hours_low=low, hours_high=high, fixable=all(f["fixable"] for f in group),
            needs_change=any(f["severity"] != "info" for f in group), blocks=blocks, rationale=rationale))
    return items


def op_items(ops: list[dict[str, Any]]) -> list[ChangeItem]:
    items = []
    for r in ops:
        if r["status"] in BLOCKING_STATUSES:
            how = "predicted by --against" if r["source"] == "predicted" else "on the target"
            where = f" at {r['sites'][0]}" if r["sites"] else ""
            low, high = HOURS["high"]
            items.append(ChangeItem(
                id="", kind="op", family="ops", path=None, rules=(), sites=tuple(r["sites"][:10]),
                count=r["count"], effort="high", hours_low=low, hours_high=high, fixable=False,
                needs_change=True, blocks=True,
                rationale=f"{r['op']} is {r['status']} ({how}){where}: "
                          + ("it never returned on the target; the backend must fix the kernel, or "
                             "the model avoid the op" if r["status"] == "TIMEOUT" else
                             "the backend needs a kernel for it, or the model a composite of supported ops")))
    fallback = [r for r in ops if r["status"] == "FALLBACK"]
    if fallback:
        low, high = HOURS["low"]
        names = ", ".join(r["op"] for r in fallback[:5])
        items.append(ChangeItem(
            id="", kind="fallback", family="ops", path=None, rules=(),
            sites=tuple(s for r in fallback for s in r["sites"][:1])[:10], count=len(fallback),
            effort="low", hours_low=low, hours_high=high, fixable=False, needs_change=True, blocks=False,
            rationale=f"{len(fallback)} op(s) ran through the CPU fallback ({names}): correct but slow; "
                      "measure, then ask the backend for kernels"))
    return items


def runtime_item(runtime: dict[str, Any] | None, ops: list[dict[str, Any]]) -> list[ChangeItem]:
    if runtime is None or runtime["outcome"] not in ("raised", "crashed"):
        return []
    if any(r["status"] in BLOCKING_STATUSES and r["source"] == "live" for r in ops):
        return []  # the failing op is its own item
    exc = runtime.get("exception") or {}
    at = f" at {exc['site']}" if exc.get("site") else ""
    what = f"raised {exc.get('type')}{at}" if runtime["outcome"] == "raised" else "crashed"
    low, high = HOURS["medium"]
    return [ChangeItem(
        id="", kind="runtime", family="runtime", path=None, rules=(),
        sites=(exc["site"],) if exc.get("site") else (), count=1, effort="medium", hours_low=low,
        hours_high=high, fixable=False, needs_change=True, blocks=True,
        rationale=f"the script {what} on the target: find out why before the port can be judged")]


def change_items(findings: list[dict[str, Any]], ops: list[dict[str, Any]],
                 runtime: dict[str, Any] | None) -> list[ChangeItem]:
    """Every change item of the port, blocking ones first, numbered C1, C2, ..."""
    items = finding_items(findings) + op_items(ops) + runtime_item(runtime, ops)
    items.sort(key=lambda i: (not i.blocks, -EFFORTS.index(i.effort), i.path or "", i.family))
    return [dataclasses.replace(item, id=f"C{n}") for n, item in enumerate(items, 1)]


def effort_of(items: list[ChangeItem], findings: list[dict[str, Any]], ops: list[dict[str, Any]]) -> Effort:
    by_effort = {e: 0 for e in EFFORTS}
    by_severity = {s: 0 for s in ("info", "warning", "error")}
    for f in findings:
        by_effort[f["effort"]] += 1
        by_severity[f["severity"]] = by_severity.get(f["severity"], 0) + 1
    counted = [i for i in items if i.needs_change]
    return Effort(
        overall=_level(i.effort for i in counted), items=len(items),
        hours_low=round(sum(i.hours_low for i in counted), 2),
        hours_high=round(sum(i.hours_high for i in counted), 2),
        findings=len(findings), fixable=sum(f["fixable"] for f in findings),
        blocking_ops=sum(r["status"] in BLOCKING_STATUSES for r in ops),
        fallback_ops=sum(r["status"] == "FALLBACK" for r in ops),
        by_effort=by_effort, by_severity=by_severity)


def items_summary(items: list[ChangeItem]) -> str:
    """One line naming every change item by what happens to it, from the list the table and the
    JSON show: applied by --fix (its `fixable`), by hand, or informational only."""
    groups = (("applied by --fix", [i.id for i in items if i.fixable]),
              ("to change by hand", [i.id for i in items if not i.fixable and i.needs_change]),
              ("informational, no change needed", [i.id for i in items if not i.fixable and not i.needs_change]))
    named = [f"{len(ids)} {what} ({', '.join(ids)})" for what, ids in groups if ids]
    return f"{plural(len(items), 'change item')}: " + "; ".join(named)


def decide(items: list[ChangeItem], runtime: dict[str, Any] | None) -> Verdict:
    summary = [items_summary(items)] if items else []
    blocking = [i for i in items if i.blocks]
    if blocking:
        return Verdict("blocked", [f"{i.id}: {i.rationale}" for i in blocking] + summary, [i.id for i in blocking])
    if any(i.needs_change for i in items):
        return Verdict("ready-with-fixes", summary, [])
    if runtime is None:
        return Verdict("ready", ["no CUDA-specific code needs a change (runtime not checked: --static-only)"]
                       + summary, [])
    return Verdict("ready", ["no CUDA-specific code needs a change and every op ran on the target"] + summary, [])
