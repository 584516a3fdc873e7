"""The census in figures: types and pairs that run, per task, the causes table and the aten
overloads the zoo exercises (the union over every task, and per task)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from op_db.text import cut
from conformance.models.causes import CAUSES


@dataclasses.dataclass
class CensusSummary:
    types: int
    types_ok: int  # types with at least one pair that builds and runs
    pairs: int
    pairs_ok: int
    per_task: dict[str, dict[str, int]]  # task -> {"types", "ok", "aten_ops"}
    causes: dict[str, int]  # cause -> failing pairs, every cause of the closed set listed
    dependencies: dict[str, int]  # optional dependency -> failing pairs
    aten_ops: int  # distinct overloads over every pair that ran

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def summarise(entries: Sequence[Any], statuses: dict[str, Any]) -> CensusSummary:
    from conformance.models.causes import OPTIONAL_DEPENDENCY
    from conformance.models.census import aten_coverage

    total, per_task_ops = aten_coverage(statuses)
    per_task: dict[str, dict[str, int]] = {}
    ok_types, all_types = set(), set()
    causes: Counter[str] = Counter(dict.fromkeys(CAUSES, 0))
    dependencies: Counter[str] = Counter()
    for entry in entries:
        status = statuses[entry.subject]
        counts = per_task.setdefault(entry.task, {"types": 0, "ok": 0, "aten_ops": len(per_task_ops.get(entry.task, ()))})
        counts["types"] += 1
        all_types.add(entry.model_type)
        if status.ok:
            counts["ok"] += 1
            ok_types.add(entry.model_type)
        else:
            causes[status.cause] += 1
            if status.cause == OPTIONAL_DEPENDENCY:
                dependencies[status.detail] += 1
    return CensusSummary(len(all_types), len(ok_types), len(entries), sum(c["ok"] for c in per_task.values()),
                         per_task, dict(causes), dict(dependencies.most_common()), len(total))


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _short(text: str, limit: int = 110) -> str:
    return cut(text, limit)


def render_listing(rows: list[dict[str, Any]], summary: CensusSummary | None,
                   escape: Callable[[str], str], group: str = "task") -> str:
    """The pairs table (with each failure's cause under --check-build), then the figures;
    `escape` makes model-supplied text (exception messages) safe for a terminal."""
    from tabulate import tabulate

    def cell(text: str) -> str:
        return escape(_short(str(text)))

    headers = ["subject", group, "class"] + (["build", "aten ops"] if summary else [])
    table = [[cell(r["subject"]), cell(r["task"]), cell(r["class_name"])]
             + ([cell(r["build"]), r["aten_ops"]] if summary else []) for r in rows]
    out = [tabulate(table, headers=headers), ""]
    if summary is None:
        counts = Counter(r["task"] for r in rows)
        out.append(tabulate(sorted(counts.items()), headers=[group, "types"]))
        return "\n".join(out)
    out.append(tabulate([[cell(task), c["types"], c["ok"], c["aten_ops"]] for task, c in summary.per_task.items()],
                        headers=[group, "types", "build+forward ok", "distinct aten overloads"]))
    out += ["", tabulate([[cause, n] for cause, n in summary.causes.items()], headers=["cause", "pairs"])]
    if summary.dependencies:
        out += ["", tabulate([[cell(name), n] for name, n in summary.dependencies.items()],
                             headers=["optional dependency", "pairs"])]
    if group == "family":  # one class per subject: the pair counts are the class counts
        return "\n".join(out + ["", f"classes: {summary.pairs_ok}/{summary.pairs} build tiny and run a forward "
                                    f"({_percent(summary.pairs_ok, summary.pairs)})",
                                 f"distinct aten overloads exercised by the zoo: {summary.aten_ops}"])
    out += ["",
            f"types: {summary.types_ok}/{summary.types} run a forward in at least one task "
            f"({_percent(summary.types_ok, summary.types)})",
            f"(type, task) pairs: {summary.pairs_ok}/{summary.pairs} ({_percent(summary.pairs_ok, summary.pairs)})",
            f"distinct aten overloads exercised by the zoo: {summary.aten_ops}"]
    return "\n".join(out)
