"""The porting report: verdict, effort, findings, op table, remapped calls, patch, runtime.

Inputs are the static scan (porting_cli.scan), the patch (porting_cli.fix) and, unless
`--static-only`, the runtime trace (porting_cli.trace) with optional predictions (--against).
The report is a plain dict (`PortReport.to_dict()`), which every renderer in
reports/render/porting.py and reports/render/sarif.py reads. Imports nothing heavy.

Verdict rules (a finding "needs a change" unless its severity is `info`):

* `blocked`: an op is UNSUPPORTED, ERROR or TIMEOUT (it hung until --max-seconds) on the
  target (seen live, or predicted by --against for an op the script did not reach live),
  or a finding that needs a change is neither auto-fixable nor of effort none/low (e.g. a
  CUDA extension, flash_attn), or the script raised or crashed on the target outside of any op (it does not run there as it is).
* `ready-with-fixes`: not blocked, and there are findings that need a change (all of them
  auto-fixable or low effort) or ops that ran through the CPU fallback.
* `ready`: no finding needs a change and every op ran on the target.

Call sites that ran only because the trace remapped them are findings too (NCRT1,
porting_cli/remap_findings.py). A script that calls `sys.exit(n)` has finished (its code is
noted). A run stopped by --max-steps or --max-seconds is judged on what was seen; a time stop
says the report is partial.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from porting_cli.scan.rules import EFFORTS, RULES_BY_ID

VERDICTS = ("ready", "ready-with-fixes", "blocked")
BLOCKING_STATUSES = ("UNSUPPORTED", "ERROR", "TIMEOUT")
# Order of the op table: what blocks first.
STATUS_ORDER = ("UNSUPPORTED", "ERROR", "TIMEOUT", "FALLBACK", "untested", "not-reached", "ran")
SITES_PER_OP = 10
# A rough planning figure per item, by effort level: "none" is applied by --fix; "low" is a
# one-line manual change; "medium" reworks a code path (streams, NCCL); "high" replaces a
# CUDA-only dependency or waits for a backend kernel. Reported as a sum, never as a promise.
HOURS_PER_ITEM = {"none": 0.0, "low": 0.5, "medium": 4.0, "high": 16.0}
OP_EFFORT = {"UNSUPPORTED": "high", "ERROR": "high", "TIMEOUT": "high", "FALLBACK": "low"}


@dataclasses.dataclass
class PortReport:
    script: str
    verdict: str
    reasons: list[str]
    effort: dict[str, Any]
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


def needs_change(finding: dict[str, Any]) -> bool:
    return finding["severity"] != "info"


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


def effort_estimate(scan_effort: Any, findings: list[dict[str, Any]], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Overall effort (none/low/medium/high), counts, and a rough sum of hours."""
    levels = [f["effort"] for f in findings if needs_change(f)]
    op_levels = [OP_EFFORT[r["status"]] for r in ops if r["status"] in OP_EFFORT]
    overall = max(levels + op_levels, key=EFFORTS.index, default="none")
    return {
        "overall": overall,
        "findings": scan_effort.total,
        "fixable": scan_effort.fixable,
        "by_effort": dict(scan_effort.by_effort),
        "by_severity": dict(scan_effort.by_severity),
        "blocking_ops": sum(r["status"] in BLOCKING_STATUSES for r in ops),
        "fallback_ops": sum(r["status"] == "FALLBACK" for r in ops),
        "hours": sum(HOURS_PER_ITEM[level] for level in levels + op_levels),
    }


def decide(findings: list[dict[str, Any]], ops: list[dict[str, Any]], runtime: dict[str, Any] | None) -> tuple[str, list[str]]:
    """The verdict and the sentences that justify it (module docstring has the rules)."""
    blocked: list[str] = []
    for r in ops:
        if r["status"] in BLOCKING_STATUSES:
            where = f" at {r['sites'][0]}" if r["sites"] else ""
            how = "predicted by --against" if r["source"] == "predicted" else "on the target"
            blocked.append(f"{r['op']} is {r['status']} ({how}){where}")
    needing = [f for f in findings if needs_change(f)]
    for f in needing:
        if not f["fixable"] and f["effort"] not in ("none", "low"):
            blocked.append(f"{f['rule']} at {f['path']}:{f['line']} needs {f['effort']}-effort manual work")
    if runtime is not None and runtime["outcome"] in ("raised", "crashed") and not any(
            r["status"] in BLOCKING_STATUSES and r["source"] == "live" for r in ops):
        exc = runtime.get("exception") or {}
        at = f" at {exc['site']}" if exc.get("site") else ""
        what = f"raised {exc.get('type')}{at}" if runtime["outcome"] == "raised" else "crashed"
        blocked.append(f"the script {what} on the target")
    if blocked:
        return "blocked", blocked
    reasons = []
    if needing:
        fixable = sum(f["fixable"] for f in needing)
        reasons.append(f"{len(needing)} finding(s) need a change ({fixable} auto-fixable with --fix)")
    fallback = [r["op"] for r in ops if r["status"] == "FALLBACK"]
    if fallback:
        reasons.append(f"{len(fallback)} op(s) ran through the CPU fallback: {', '.join(fallback[:5])}")
    if reasons:
        return "ready-with-fixes", reasons
    if runtime is None:
        return "ready", ["no CUDA-specific code found (runtime not checked: --static-only)"]
    return "ready", ["no CUDA-specific code found and every op ran on the target"]


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
    from porting_cli.remap_findings import REMAP_RULE, remap_findings

    findings = [finding_dict(f) for f in sorted(scan.findings, key=lambda f: (f.path, *f.sort_key()))]
    ops = op_table(trace, prediction, reach) if trace is not None else []
    runtime = None
    if trace is not None:
        runtime = runtime_dict(trace, max_steps, max_seconds, prediction.source if prediction else None, reach)
    remapped = sorted(trace.remapped, key=lambda r: _site_key(r["site"]) + (r["what"],)) if trace is not None else []
    findings += remap_findings(remapped, findings, base_dir)  # works only by remap: counts too
    findings.sort(key=lambda f: (f["path"], f["line"], f["col"], f["rule"]))  # grouped by file
    verdict, reasons = decide(findings, ops, runtime)
    rules = {f["rule"]: dataclasses.asdict(RULES_BY_ID[f["rule"]]) for f in findings if f["rule"] in RULES_BY_ID}
    if any(f["rule"] == REMAP_RULE["id"] for f in findings):
        rules[REMAP_RULE["id"]] = dict(REMAP_RULE)
    return PortReport(script=script, verdict=verdict, reasons=reasons,
                      effort=effort_estimate(scan.effort, findings, ops), findings=findings, ops=ops,
                      remapped=remapped, patch=patch, runtime=runtime, rules=rules,
                      files=files or [], warnings=warnings or [])


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
