"""The porting report: verdict, effort, findings, op table, remapped calls, patch, runtime.

Inputs are the static scan (porting_cli.analysis.scan), the patch (porting_cli.analysis.fix) and, unless
`--static-only`, the runtime trace (porting_cli.runtime.trace) with optional predictions (--against).
The report is a plain dict (`PortReport.to_dict()`), which every renderer in
reports/render/porting.py and reports/render/sarif.py reads. Imports nothing heavy.

The verdict, the change items and the effort come from porting_cli.analysis.effort (its docstring
has the rules): `blocked` only where new code is needed, and then it names the items
that cause it (`blocked_by`). An op that hangs until --max-seconds is a TIMEOUT op, which
blocks like an UNSUPPORTED one.

Call sites that ran only because the trace remapped them are findings too (NCRT1,
porting_cli/runtime/remap_findings.py). A script that calls `sys.exit(n)` has finished (its code is
noted). A run stopped by --max-steps or --max-seconds is judged on what was seen; a time stop
says the report is partial.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from porting_cli.analysis.effort import BLOCKING_STATUSES, VERDICTS, change_items, decide, effort_of
from porting_cli.analysis.scan.rules import RULES_BY_ID

__all__ = ["BLOCKING_STATUSES", "VERDICTS", "PortReport", "build_report", "exit_code", "op_table"]
# Order of the op table: what blocks first.
STATUS_ORDER = ("UNSUPPORTED", "ERROR", "TIMEOUT", "FALLBACK", "untested", "not-reached", "ran")
SITES_PER_OP = 10


@dataclasses.dataclass
class PortReport:
    script: str
    verdict: str
    reasons: list[str]
    effort: dict[str, Any]
    items: list[dict[str, Any]]      # the change items (porting_cli.analysis.effort.ChangeItem)
    blocked_by: list[str]            # ids of the items that make the verdict blocked
    findings: list[dict[str, Any]]
    ops: list[dict[str, Any]]
    remapped: list[dict[str, Any]]
    patch: str
    runtime: dict[str, Any] | None
    rules: dict[str, dict[str, Any]]  # metadata of the rules that fired (SARIF needs it)
    files: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # per scanned file
    warnings: list[str] = dataclasses.field(default_factory=list)  # files skipped, links not followed

    def to_dict(self) -> dict[str, Any]:
        return {"schema": 1, **dataclasses.asdict(self)}


def finding_dict(finding: Any) -> dict[str, Any]:
    return {
        "rule": finding.rule_id, "path": finding.path, "line": finding.line, "col": finding.col,
        "end_line": finding.end_line, "end_col": finding.end_col, "severity": finding.severity,
        "effort": finding.effort, "message": finding.message, "fixable": finding.fixable,
        "family": finding.family, "source_line": finding.source_line.rstrip("\r\n"),
    }


def op_table(trace: Any, prediction: Any = None, reach: Any = None) -> list[dict[str, Any]]:
    """One row per aten overload: count, status on the target, user sites, dtypes, prediction."""
    rows: dict[str, dict[str, Any]] = {}

    def row(op: str, source: str) -> dict[str, Any]:
        return rows.setdefault(op, {"op": op, "count": 0, "status": "ran", "source": source,
                                    "sites": Counter(), "dtypes": set(), "message": None, "processes": set()})

    for use in trace.uses:
        entry = row(use.op, "live")
        entry["processes"].add(use.process)
        entry["count"] += use.count
        entry["dtypes"].update(use.dtypes)
        entry["sites"][use.site or "(library code)"] += use.count
    for error in trace.errors:
        entry = row(error["op"], "live")
        entry["count"] += 1
        entry["dtypes"].update(error["dtypes"])
        entry["sites"][error["site"] or "(library code)"] += 1
        if entry["message"] is None:
            entry.update(status=error["status"], message=error["message"], error_site=error["site"])
    for op in trace.fallbacks:
        entry = row(op, "live")
        if entry["status"] == "ran":
            entry["status"] = "FALLBACK"
    if reach is not None:
        for use in reach.uses:
            if use.op in rows and rows[use.op]["source"] == "live":
                continue
            entry = row(use.op, "predicted")
            entry["count"] += use.count
            entry["dtypes"].update(use.dtypes)
            entry["sites"][use.site or "(library code)"] += use.count
    table = []
    for entry in rows.values():
        predicted = prediction.status_of(entry["op"]) if prediction is not None else None
        if entry["source"] == "predicted":
            entry["status"] = predicted or "not-reached"
        sites = [site for site, _ in sorted(entry["sites"].items(), key=lambda kv: (-kv[1], kv[0]))]
        error_site = entry.pop("error_site", None)
        if error_site in sites:  # the line where it failed comes first
            sites.remove(error_site)
            sites.insert(0, error_site)
        entry.update(sites=sites[:SITES_PER_OP], dtypes=sorted(entry["dtypes"]), predicted=predicted,
                     processes=sorted(entry["processes"]))
        table.append(entry)
    table.sort(key=lambda r: (STATUS_ORDER.index(r["status"]) if r["status"] in STATUS_ORDER else 0,
                              -r["count"], r["op"]))
    return table


def runtime_dict(trace: Any, max_steps: int, max_seconds: float | None, against: str | None,
                 reach: Any = None) -> dict[str, Any]:
    return {
        "device": trace.device, "backend": trace.backend, "simulated": trace.simulated,
        "versions": trace.versions, "outcome": trace.outcome,
        "outcome_text": trace.describe_outcome(max_steps, max_seconds),
        "partial": trace.outcome in ("stopped-time", "crashed"),
        "steps": trace.steps, "seconds": trace.seconds, "exit_code": trace.exit_code,
        "exit_message": trace.exit_message, "exception": trace.exception,
        "divergence": trace.divergence, "notes": trace.notes, "output_tail": trace.output_tail,
        "limits": {"max_steps": max_steps, "max_seconds": max_seconds},
        "against": against, "reach_run": reach is not None, "processes": trace.processes,
    }


def build_report(script: str, scan: Any, patch: str, trace: Any = None, *, prediction: Any = None,
                 reach: Any = None, max_steps: int = 2, max_seconds: float | None = None,
                 files: list[dict[str, Any]] | None = None, warnings: list[str] | None = None,
                 base_dir: str | None = None) -> PortReport:
    """`files`/`warnings`: project mode's per-file summary and skipped files; `base_dir`: the
    folder that finding paths and runtime sites are relative to (default: the working one)."""
    from porting_cli.runtime.remap_findings import REMAP_RULE, remap_findings

    findings = [finding_dict(f) for f in sorted(scan.findings, key=lambda f: (f.path, *f.sort_key()))]
    ops = op_table(trace, prediction, reach) if trace is not None else []
    runtime = None
    if trace is not None:
        runtime = runtime_dict(trace, max_steps, max_seconds, prediction.source if prediction else None, reach)
    remapped = sorted(trace.remapped, key=lambda r: _site_key(r["site"]) + (r["what"],)) if trace is not None else []
    findings += remap_findings(remapped, findings, base_dir)  # works only by remap: counts too
    findings.sort(key=lambda f: (f["path"], f["line"], f["col"], f["rule"]))  # grouped by file
    items = change_items(findings, ops, runtime)
    verdict = decide(items, runtime)
    rules = {rule: dataclasses.asdict(RULES_BY_ID[rule]) for rule in dict.fromkeys(f["rule"] for f in findings)
             if rule in RULES_BY_ID}
    if any(f["rule"] == REMAP_RULE["id"] for f in findings):
        rules[REMAP_RULE["id"]] = dict(REMAP_RULE)
    return PortReport(script=script, verdict=verdict.verdict, reasons=verdict.reasons,
                      effort=effort_of(items, findings, ops).to_dict(),
                      items=[i.to_dict() for i in items], blocked_by=verdict.blocked_by,
                      findings=findings, ops=ops, remapped=remapped, patch=patch, runtime=runtime,
                      rules=rules, files=files or [], warnings=warnings or [])


def _site_key(site: str | None) -> tuple[str, int]:
    """Order 'path:line' sites by path, then line as a number; library code last."""
    if not site:
        return ("\uffff", 0)
    path, _, line = site.rpartition(":")
    return (path, int(line)) if line.isdigit() else (site, 0)


def exit_code(verdict: str, fail_on: str | None) -> int:
    """--fail-on blocked: exit 1 when blocked; --fail-on fixes: exit 1 unless ready."""
    if fail_on == "blocked" and verdict == "blocked":
        return 1
    if fail_on == "fixes" and verdict != "ready":
        return 1
    return 0
