"""The report data model: every section a report shows, computed once from stored rows.

Every renderer (table, Markdown, HTML, JSON, JUnit, Parquet) and the gate
read a `Report`; none of them looks at the store or recomputes a result. The
sections only group and count what the suites recorded.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from op_db.errors import InputError
from op_db.records import FAILING, STATUS_ORDER, WORKING, Result, Status

JSON_SCHEMA = 1
# Statuses whose failing_op names what blocks the item (DESIGN.md statuses).
BLOCKING = FAILING
FP8_SUITE = "fp8"
MODEL_SUITE = "model"


@dataclasses.dataclass
class Matrix:
    """Subject rows x dtype columns; each cell holds the status of one item.

    The main matrix leaves out the model and FP8 suites, which have their own.

    A row is one (suite, subject, variant, mode): the matrix is op x dtype x
    mode x variant flattened to two dimensions.
    """

    dtypes: list[str]
    rows: list[dict[str, Any]]  # {suite, subject, variant, mode, cells: {dtype: STATUS}}


@dataclasses.dataclass
class Report:
    run: dict[str, Any]
    results: list[Result]
    summary: dict[str, int]
    pass_rates: list[dict[str, Any]]
    matrix: Matrix
    blockers: list[dict[str, Any]]
    claims: dict[str, list[dict[str, Any]]]
    fallbacks: list[dict[str, Any]]
    models: Matrix | None
    fp8: Matrix | None
    coverage: dict[str, int]
    rounding: Matrix | None = None  # op x dtype: the rounding class measured (Result.numerics)
    graph_breaks: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    families: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # Diffusers zoo, per family

    @property
    def simulated(self) -> bool:
        return bool(self.run.get("simulated"))

    @property
    def title(self) -> str:
        run = self.run
        label = f"run {run.get('id')} on {run.get('device')} ({run.get('backend')})"
        return label + (" [SIMULATED]" if self.simulated else "")

    def to_json(self) -> dict[str, Any]:
        """The DESIGN.md export: schema, run, summary, results, plus the sections."""
        return {
            "schema": JSON_SCHEMA,
            "run": self.run,
            "summary": self.summary,
            "results": [r.to_dict() for r in self.results],
            "sections": {
                "pass_rates": self.pass_rates,
                "matrix": dataclasses.asdict(self.matrix),
                "blockers": self.blockers,
                "claims": self.claims,
                "fallbacks": self.fallbacks,
                "models": dataclasses.asdict(self.models) if self.models else None,
                "fp8": dataclasses.asdict(self.fp8) if self.fp8 else None,
                "coverage": self.coverage,
                "rounding": dataclasses.asdict(self.rounding) if self.rounding else None,
                "graph_breaks": self.graph_breaks,
                "families": self.families,
            },
        }


def public_run(run: dict[str, Any]) -> dict[str, Any]:
    """The run row as reports show it: flat versions, `simulated` always present."""
    data = dict(run)
    data["simulated"] = bool(data.get("simulated"))
    data.pop("counts", None)
    return data


def build_report(
    run: dict[str, Any], results: list[Result], coverage: list[tuple[str, str]] = (),
    zoo_ops: dict[str, set[str]] | None = None,
) -> Report:
    results = sorted(results, key=lambda r: r.item)
    summary = {s.value: 0 for s in STATUS_ORDER}
    for r in results:
        summary[r.status.value] += 1
    suites = {r.suite for r in results}
    return Report(
        run=public_run(run),
        results=results,
        summary=summary,
        pass_rates=pass_rates(results),
        matrix=matrix([r for r in results if r.suite not in (MODEL_SUITE, FP8_SUITE)]),
        blockers=blockers(results, zoo_ops),
        claims=claims(results),
        fallbacks=fallbacks(results),
        models=matrix(results, suite=MODEL_SUITE) if MODEL_SUITE in suites else None,
        fp8=matrix(results, suite=FP8_SUITE) if FP8_SUITE in suites else None,
        coverage=dict(Counter(kind for _, kind in coverage)),
        rounding=rounding(results),
        graph_breaks=graph_breaks(results),
        families=families(results),
    )


def report_from_store(store: Any, run_spec: str | int | None = "latest",
                      zoo_ops: dict[str, set[str]] | None = None) -> Report:
    run_id = store.resolve_run(run_spec)
    return build_report(store.run(run_id), store.results(run_id), store.coverage(run_id), zoo_ops)


def report_from_json(path: str | Path) -> Report:
    """Read back a `report --format json` export (the gate's FILE.json baseline)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"report file {path} does not exist.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path} is not a JSON report ({exc}).") from None
    if not isinstance(data, dict) or data.get("schema") != JSON_SCHEMA or "results" not in data:
        raise InputError(f"{path} is not a neuron-check JSON report (schema {JSON_SCHEMA}).")
    try:
        results = [Result.from_dict(row) for row in data["results"]]
    except (TypeError, ValueError) as exc:
        raise InputError(f"{path} has a malformed result ({exc}).") from None
    return build_report(data.get("run") or {}, results)


# -- sections ----------------------------------------------------------------


def pass_rate(counts: Counter) -> float | None:
    """Working items over judged items; SKIP and REF_ERROR say nothing about the backend."""
    working = sum(counts[s] for s in WORKING)
    judged = working + sum(counts[s] for s in FAILING)
    return round(working / judged, 4) if judged else None


def pass_rates(results: list[Result]) -> list[dict[str, Any]]:
    """One row per (suite, dtype) plus a per-suite 'all' row."""
    groups: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in results:
        groups[(r.suite, r.dtype)][r.status] += 1
        groups[(r.suite, "all")][r.status] += 1
    rows = []
    for (suite, dtype), counts in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] == "all", kv[0][1])):
        rows.append({
            "suite": suite,
            "dtype": dtype,
            "items": sum(counts.values()),
            "working": sum(counts[s] for s in WORKING),
            "failing": sum(counts[s] for s in FAILING),
            "pass_rate": pass_rate(counts),
        })
    return rows


def matrix(results: list[Result], suite: str | None = None) -> Matrix:
    chosen = [r for r in results if suite is None or r.suite == suite]
    dtypes = sorted({r.dtype for r in chosen})
    rows: dict[tuple[str, str, str, str], dict[str, str]] = {}
    for r in chosen:
        rows.setdefault((r.suite, r.subject, r.variant, r.mode), {})[r.dtype] = r.status.value
    return Matrix(
        dtypes=dtypes,
        rows=[
            {"suite": k[0], "subject": k[1], "variant": k[2], "mode": k[3], "cells": cells}
            for k, cells in sorted(rows.items())
        ],
    )


def rounding(results: list[Result]) -> Matrix | None:
    """The rounding class of every result that measured one (None: no result did)."""
    measured = [r for r in results if r.numerics.get("rounding")]
    if not measured:
        return None
    dtypes = sorted({r.dtype for r in measured})
    rows: dict[tuple[str, str, str, str], dict[str, str]] = {}
    for r in measured:
        rows.setdefault((r.suite, r.subject, r.variant, r.mode), {})[r.dtype] = r.numerics["rounding"]
    return Matrix(dtypes=dtypes, rows=[
        {"suite": k[0], "subject": k[1], "variant": k[2], "mode": k[3], "cells": cells} for k, cells in sorted(rows.items())
    ])


def blockers(results: list[Result], zoo_ops: dict[str, set[str]] | None = None) -> list[dict[str, Any]]:
    """Aten overloads ranked by how many subjects (OpInfos, models) they block, then by items:
    "fix these 5 ops to unlock 40 models".

    With `zoo_ops` (zoo pair subject -> the aten overloads its forward dispatched, from the zoo
    census), each failing overload also counts the zoo models whose forward uses it (`zoo_models`),
    whether or not the run reached them, and the ranking puts that count first."""
    by_op: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        if r.status in BLOCKING and r.failing_op:
            by_op[r.failing_op].append(r)
    users: dict[str, int] = Counter(op for ops in (zoo_ops or {}).values() for op in ops)
    rows = []
    for op, items in by_op.items():
        blocked = sorted({f"{r.suite}:{r.subject}" for r in items})
        row = {
            "op": op,
            "subjects": len(blocked),
            "items": len(items),
            "statuses": dict(Counter(r.status.value for r in items)),
            "dtypes": sorted({r.dtype for r in items}),
            "blocks": blocked,
        }
        if zoo_ops is not None:
            row["zoo_models"] = users.get(op, 0)
        rows.append(row)
    return sorted(rows, key=lambda row: (-row.get("zoo_models", 0), -row["subjects"], -row["items"], row["op"]))


def zoo_ops_from_census(path: str | Path) -> dict[str, set[str]]:
    """Zoo pair subject -> aten overloads, from `neuron-check models --list --check-build --format
    json` output (the union over every task is the zoo's coverage); raises InputError."""
    try:
        data = json.loads(Path(path).read_text())
        return {row["subject"]: set(row["ops"]) for row in data["models"] if row.get("ops")}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path} is not a zoo census (models --list --check-build --format json): {exc}") from exc


TOP_BLOCKING_OPS = 3


def families(results: list[Result]) -> list[dict[str, Any]]:
    """Per model family (the Diffusers zoo records one in `extra["family"]`): classes run, passed
    (every item working) and blocked (an item failing), and the aten overloads that block the
    most of its classes."""
    by_family: dict[str, dict[str, list[Result]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        family = (r.extra or {}).get("family")
        if family:
            by_family[family][r.subject].append(r)
    rows = []
    for family, subjects in sorted(by_family.items()):
        blocked = {s: items for s, items in subjects.items() if any(r.status in BLOCKING for r in items)}
        passed = [s for s, items in subjects.items() if all(r.status in WORKING for r in items)]
        ops = Counter(op for items in blocked.values()
                      for op in {r.failing_op for r in items if r.status in BLOCKING and r.failing_op})
        rows.append({"family": family, "classes": len(subjects), "passed": len(passed), "blocked": len(blocked),
                     "top_blocking_ops": [{"op": op, "classes": n} for op, n in ops.most_common(TOP_BLOCKING_OPS)]})
    return rows


def graph_breaks(results: list[Result]) -> list[dict[str, Any]]:
    """Compile mode's graph-break reasons ranked by how many subjects (models, ops) they break,
    then by items: the breaks worth fixing first."""
    by_reason: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        for reason in (r.compile or {}).get("break_reasons", ()):
            by_reason[reason].append(r)
    rows = [{"reason": reason, "subjects": len({f"{r.suite}:{r.subject}" for r in items}), "items": len(items),
             "breaks": sorted({f"{r.suite}:{r.subject}" for r in items})} for reason, items in by_reason.items()]
    return sorted(rows, key=lambda row: (-row["subjects"], -row["items"], row["reason"]))


def claims(results: list[Result]) -> dict[str, list[dict[str, Any]]]:
    """Where the suite's dtype claims disagree with what was measured."""
    works_unclaimed = [r for r in results if r.status == Status.PASS and r.claimed is False]
    claimed_fails = [r for r in results if r.claimed is True and r.status in FAILING]
    return {
        "works_but_unclaimed": [_item_dict(r) for r in works_unclaimed],
        "claimed_but_fails": [_item_dict(r) for r in claimed_fails],
    }


def fallbacks(results: list[Result]) -> list[dict[str, Any]]:
    """Ops that ran through the CPU fallback, with the items that hit them."""
    by_op: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        for op in r.fallback_ops:
            by_op[op].append(r)
    ranked = sorted(by_op.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [
        {"op": op, "items": len(items), "subjects": sorted({f"{r.suite}:{r.subject}" for r in items})}
        for op, items in ranked
    ]


def _item_dict(r: Result) -> dict[str, Any]:
    return {
        "suite": r.suite, "subject": r.subject, "variant": r.variant, "dtype": r.dtype,
        "mode": r.mode, "status": r.status.value,
    }
