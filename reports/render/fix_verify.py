"""What `neuron-check SCRIPT --fix --verify` prints: the files written and each one's verification.

The document (`--format json`), schema 1:

    {"schema": 1, "script": PATH, "written": [PATH...],
     "files": [{"path", "applied": [RULE...], "remaining": N}...],
     "verify": {"device", "verdict", "defective", "files": [{"path", "verdict", "module", "reason",
                "exception", "original", "fixes", "stopped_before"}...]}}

The table shows the same: one line per written file, then the verification section.
"""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from reports.sanitize import dumps_json, for_json, for_terminal

SCHEMA = 1


def document(script: str, fixes: list[dict[str, Any]], verification: dict[str, Any]) -> dict[str, Any]:
    """`fixes`: per changed file {"path", "applied", "remaining"}; `verification`: Verification.to_dict()."""
    return {"schema": SCHEMA, "script": script, "written": [f["path"] for f in fixes], "files": fixes,
            "verify": verification}


def render(doc: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return dumps_json(for_json(doc), indent=2) + "\n"
    return render_table(doc)


def render_table(doc: dict[str, Any]) -> str:
    out = [f"{_t(doc['script'])}: wrote {len(doc['written'])} fixed file(s), each original kept as FILE.orig"]
    for f in doc["files"]:
        out.append(f"  {_t(f['path'])}: {len(f['applied'])} fix(es) ({_t(', '.join(sorted(set(f['applied']))))}), "
                   f"{f['remaining']} finding(s) need a person")
    verify = doc["verify"]
    device = verify["device"] or "the default device"
    out.append(f"\n== Verification: each fixed file's import on {_t(device)} (the script's work is not run) ==")
    rows = [[_t(f["path"]), f["verdict"], _t(_detail(f))] for f in verify["files"]]
    out.append(tabulate(rows, headers=["file", "verdict", "detail"], tablefmt="simple") if rows
               else "no fixed file to verify")
    defective = verify["defective"]
    out.append(f"verdict: {verify['verdict']}" + (f" ({defective} defective fix(es): the fix's fault, "
                                                   "not the script's)" if defective else ""))
    return "\n".join(out) + "\n"


def _detail(f: dict[str, Any]) -> str:
    parts = [f["reason"]]
    exc = f.get("exception")
    if exc is not None:
        parts.append(f"{exc['type']}: {exc['message']}" + (f" at {exc['site']}" if exc.get("site") else ""))
    if f.get("fixes"):
        parts.append("fixes on or before that line: " + ", ".join(f["fixes"]))
    original = f.get("original")
    if original is not None and f["verdict"] != "script":
        parts.append(f"the original: {original['type']} at {original.get('site') or '?'}")
    if f.get("stopped_before"):
        parts.append(f"stopped before {f['stopped_before']}")
    return "; ".join(p for p in parts if p)


def _t(value: Any) -> str:
    return for_terminal(value, one_line=True)
