"""SARIF 2.1.0 output of the porting report, so GitHub code scanning shows findings inline.

Static findings keep their rule ids (NC...); ops that cannot run on the target become results
of four runtime rules at the user's source line where the op was issued. Locations use paths
relative to the repository root (the directory neuron-check ran in) with uriBaseId
%SRCROOT%, which is how GitHub maps results onto files.
"""

from __future__ import annotations

from typing import Any

from op_db.text import cut

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}

# Runtime rules: an op's status on the target -> (rule id, name, level, description).
OP_RULES = {
    "UNSUPPORTED": ("NCOP1", "unsupported-op", "error",
                    "The target backend has no kernel for this aten op; the script stops here."),
    "ERROR": ("NCOP2", "op-error", "error",
              "This aten op raised on the target backend although it exists there."),
    "FALLBACK": ("NCOP3", "cpu-fallback-op", "warning",
                 "This aten op ran through the backend's CPU fallback: correct, but slow."),
    "TIMEOUT": ("NCOP4", "op-timeout", "error",
                "This aten op did not return on the target before the time limit (it hangs)."),
}


def _version() -> str:
    try:
        import importlib.metadata

        return importlib.metadata.version("neuron-check")
    except Exception:  # noqa: BLE001 - a version string is cosmetic here
        return "0"


def _location(path: str, line: int, col: int | None = None, end_line: int | None = None,
              end_col: int | None = None, snippet: str | None = None) -> dict[str, Any]:
    region: dict[str, Any] = {"startLine": max(1, int(line)), "startColumn": max(1, int(col or 1))}
    if end_line:
        region["endLine"] = int(end_line)
        if end_col:
            region["endColumn"] = int(end_col)
    if snippet:
        region["snippet"] = {"text": snippet}
    return {"physicalLocation": {"artifactLocation": {"uri": path.replace("\\", "/"), "uriBaseId": "%SRCROOT%"},
                                 "region": region}}


def _split_site(site: str | None) -> tuple[str, int] | None:
    if not site or ":" not in site:
        return None
    path, _, line = site.rpartition(":")
    return (path, int(line)) if line.isdigit() else None


def porting_sarif(report: dict[str, Any]) -> dict[str, Any]:
    """The SARIF log (a dict ready for json.dumps) of one porting report."""
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}

    def rule(rule_id: str, name: str, level: str, text: str, help_text: str, props: dict[str, Any]) -> int:
        if rule_id not in index:
            index[rule_id] = len(rules)
            rules.append({
                "id": rule_id, "name": name,
                "shortDescription": {"text": cut(text.split("; ")[0], 200)},
                "fullDescription": {"text": text},
                "help": {"text": help_text, "markdown": help_text},
                "defaultConfiguration": {"level": level},
                "properties": props,
            })
        return index[rule_id]

    results: list[dict[str, Any]] = []
    for f in report["findings"]:
        meta = report.get("rules", {}).get(f["rule"], {})
        level = LEVELS.get(f["severity"], "warning")
        i = rule(f["rule"], meta.get("name", f["rule"]), LEVELS.get(meta.get("severity", f["severity"]), level),
                 meta.get("message", f["message"]), meta.get("message", f["message"]),
                 {"family": f.get("family"), "effort": meta.get("effort", f["effort"]),
                  "autoFixable": bool(meta.get("fixable", f["fixable"])), "tags": ["porting", "cuda"]})
        results.append({
            "ruleId": f["rule"], "ruleIndex": i, "level": level,
            "message": {"text": f["message"] + (" (neuron-check --fix applies this)" if f["fixable"] else "")},
            "locations": [_location(f["path"], f["line"], f["col"], f.get("end_line"), f.get("end_col"),
                                    f.get("source_line"))],
            "properties": {"effort": f["effort"], "fixable": f["fixable"]},
        })
    device = (report.get("runtime") or {}).get("device") or "the target"
    for row in report["ops"]:
        if row["status"] not in OP_RULES:
            continue
        rule_id, name, level, text = OP_RULES[row["status"]]
        i = rule(rule_id, name, level, text, text, {"tags": ["porting", "runtime"]})
        sites = [s for s in (_split_site(site) for site in row["sites"]) if s is not None]
        how = " (predicted)" if row["source"] == "predicted" else ""
        message = f"{row['op']} is {row['status']} on {device}{how}"
        if row.get("message"):
            message += f": {row['message']}"
        result: dict[str, Any] = {"ruleId": rule_id, "ruleIndex": i, "level": level, "message": {"text": message},
                                  "properties": {"op": row["op"], "dtypes": row["dtypes"], "count": row["count"]}}
        if sites:
            result["locations"] = [_location(path, line) for path, line in sites[:1]]
            if len(sites) > 1:
                result["relatedLocations"] = [{"id": n, **_location(path, line)} for n, (path, line) in enumerate(sites[1:], 1)]
        else:
            result["locations"] = [_location(report["script"], 1)]
        results.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {"name": "neuron-check", "version": _version(), "rules": rules}},
            "columnKind": "unicodeCodePoints",
            "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "The directory neuron-check ran in."}}},
            "results": results,
            "properties": {"verdict": report["verdict"], "effort": report["effort"]["overall"]},
        }],
    }
