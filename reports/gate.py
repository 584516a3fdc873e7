"""The release gate: compare a run with a baseline and an expected-failure manifest.

An item is keyed by its WorkItem (suite, subject, variant, dtype, mode).

* regression: PASS or FALLBACK in the baseline, failing now;
* improvement: failing in the baseline, PASS or FALLBACK now;
* new / vanished: present in only one of the two runs;
* unexpected failure: failing now and matched by no manifest entry (only when
  a manifest is given);
* unexpected pass: a manifest entry matches the item but it works now
  (trips the gate only with --strict, so manifests stay current).

Failing means MISMATCH, UNSUPPORTED, ERROR, CRASH or TIMEOUT; SKIP and
REF_ERROR say nothing about the backend and never trip the gate.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from pathlib import Path
from typing import Any

from op_db.errors import InputError
from op_db.records import FAILING, WORKING, Result, WorkItem
from op_db.text import cut
from reports.model import Report
from reports.sanitize import for_json, for_terminal

MANIFEST_SCHEMA = 1
ENTRY_KEYS = ("suite", "subject", "variant", "dtype", "mode", "status", "reason")
MATCH_KEYS = ("suite", "subject", "variant", "dtype", "mode")


@dataclasses.dataclass
class Manifest:
    device: str | None
    entries: list[dict[str, Any]]

    def match(self, result: Result) -> dict[str, Any] | None:
        """The first entry whose globs match the item, or None."""
        for entry in self.entries:
            if all(fnmatch.fnmatchcase(getattr(result, k), str(entry.get(k, "*"))) for k in MATCH_KEYS):
                return entry
        return None


@dataclasses.dataclass
class GateOutcome:
    regressions: list[tuple[Result, Result]]  # (baseline, current)
    improvements: list[tuple[Result, Result]]
    new: list[Result]
    vanished: list[Result]
    unexpected_failures: list[Result]
    unexpected_passes: list[tuple[Result, dict[str, Any]]]
    status_changes: list[tuple[Result, dict[str, Any]]]  # failing, but not as the manifest says
    strict: bool
    # Vendor-claimed rows measured failing (`gate --claims T --fail-on-claims`), see reports.claims.
    claims_failing: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def tripped(self) -> bool:
        return bool(
            self.regressions
            or self.unexpected_failures
            or self.status_changes
            or (self.strict and self.unexpected_passes)
            or self.claims_failing
        )

    def to_json(self) -> dict[str, Any]:
        def item(r: Result) -> dict[str, Any]:
            return {**r.item._asdict(), "status": r.status.value}

        return {
            "schema": 1,
            "passed": not self.tripped,
            "strict": self.strict,
            "regressions": [{**item(c), "baseline_status": b.status.value, "message": c.message} for b, c in self.regressions],
            "improvements": [{**item(c), "baseline_status": b.status.value} for b, c in self.improvements],
            "new": [item(r) for r in self.new],
            "vanished": [item(r) for r in self.vanished],
            "unexpected_failures": [{**item(r), "message": r.message} for r in self.unexpected_failures],
            "unexpected_passes": [{**item(r), "manifest_status": e.get("status")} for r, e in self.unexpected_passes],
            "status_changes": [{**item(r), "manifest_status": e.get("status")} for r, e in self.status_changes],
            "claims_failing": [{k: row[k] for k in ("op", "line", "claim", "measured", "items")}
                               for row in self.claims_failing],
        }


def evaluate(
    current: Report,
    baseline: Report | None = None,
    manifest: Manifest | None = None,
    strict: bool = False,
) -> GateOutcome:
    now = {r.item: r for r in current.results}
    before: dict[WorkItem, Result] = {r.item: r for r in baseline.results} if baseline else {}
    regressions, improvements = [], []
    for key, old in before.items():
        new = now.get(key)
        if new is None:
            continue
        if old.status in WORKING and new.status in FAILING:
            regressions.append((old, new))
        elif old.status in FAILING and new.status in WORKING:
            improvements.append((old, new))
    unexpected_failures, unexpected_passes, status_changes = [], [], []
    if manifest is not None:
        for r in current.results:
            entry = manifest.match(r)
            if r.status in FAILING and entry is None:
                unexpected_failures.append(r)
            elif r.status in FAILING and entry.get("status") and entry["status"] != r.status.value:
                status_changes.append((r, entry))
            elif r.status in WORKING and entry is not None:
                unexpected_passes.append((r, entry))
    return GateOutcome(
        regressions=regressions,
        improvements=improvements,
        new=[r for k, r in now.items() if baseline is not None and k not in before],
        vanished=[r for k, r in before.items() if k not in now],
        unexpected_failures=unexpected_failures,
        unexpected_passes=unexpected_passes,
        status_changes=status_changes,
        strict=strict,
    )


def render_outcome(outcome: GateOutcome, limit: int = 50) -> str:
    """The gate's verdict for a CI log: counts, then the items that matter."""
    def name(r: Result) -> str:
        return f"{r.item.test_id} {r.status.value}"

    sections = [
        ("regressions", [f"{name(c)} (was {b.status.value}): {cut(_first_line(c.message or ''), 120)}"
                         for b, c in outcome.regressions]),
        ("failures the manifest does not expect", [f"{name(r)}: {cut(_first_line(r.message or ''), 120)}"
                                                   for r in outcome.unexpected_failures]),
        ("failures with another status than the manifest says",
         [f"{name(r)} (manifest: {e.get('status')})" for r, e in outcome.status_changes]),
        ("expected failures that now pass" + (" (--strict: these fail the gate)" if outcome.strict else ""),
         [f"{name(r)} (manifest: {e.get('status') or 'any failure'})" for r, e in outcome.unexpected_passes]),
        ("claimed rows that fail (--fail-on-claims)",
         [f"line {row['line']} {row['op']} claimed {row['claim']}, measured "
          + ", ".join(f"{d} {s}" for d, s in row["measured"].items()) for row in outcome.claims_failing]),
        ("improvements", [f"{name(c)} (was {b.status.value})" for b, c in outcome.improvements]),
        ("new items", [name(r) for r in outcome.new]),
        ("vanished items", [name(r) for r in outcome.vanished]),
    ]
    lines = []
    for title, rows in sections:
        lines.append(f"{title}: {len(rows)}")
        lines.extend(f"  {for_terminal(row, one_line=True)}" for row in rows[:limit])  # rows hold untrusted text
        if len(rows) > limit:
            lines.append(f"  ... and {len(rows) - limit} more (use --format json)")
    lines.append("gate: FAILED" if outcome.tripped else "gate: passed")
    return "\n".join(lines)


# -- manifests ---------------------------------------------------------------


def load_manifest(path: str | Path) -> Manifest:
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"expected-failures file {path} does not exist.") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"expected-failures file {path} is not valid YAML ({_first_line(exc)}).") from None
    if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA:
        raise InputError(f"{path} is not an expected-failures manifest (needs 'schema: {MANIFEST_SCHEMA}').")
    entries = data.get("expected_failures") or []
    if not isinstance(entries, list):
        raise InputError(f"in {path}: 'expected_failures' must be a list.")
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or "subject" not in entry:
            raise InputError(f"in {path}: expected_failures entry {index} must be a mapping with at least 'subject'.")
        unknown = sorted(set(entry) - set(ENTRY_KEYS))
        if unknown:
            raise InputError(f"in {path}: expected_failures entry {index} has unknown key {unknown[0]!r} "
                             f"(allowed: {', '.join(ENTRY_KEYS)}).")
        status = entry.get("status")
        if status is not None and (not isinstance(status, str) or status.upper() not in {s.value for s in FAILING}):
            raise InputError(f"in {path}: expected_failures entry {index} has status {status!r}; "
                             f"use one of {', '.join(sorted(s.value for s in FAILING))}.")
        if status:
            entry["status"] = status.upper()
    return Manifest(device=data.get("device"), entries=entries)


def manifest_for(report: Report) -> dict[str, Any]:
    """The manifest that expects exactly the failures of `report`."""
    entries = []
    for r in report.results:
        if r.status in FAILING:
            entries.append({**r.item._asdict(), "status": r.status.value, "reason": cut(_first_line(r.message or ""), 200)})
    return {"schema": MANIFEST_SCHEMA, "device": report.run.get("device"), "expected_failures": entries}


def write_manifest(report: Report, path: str | Path) -> int:
    import yaml

    data = for_json(manifest_for(report))  # a lone surrogate in a reason cannot be written as UTF-8
    header = (
        "# neuron-check expected failures; written by `neuron-check gate --write-expected`.\n"
        f"# run {report.run.get('id')} on {for_terminal(report.run.get('device'), one_line=True)}"
        f"{' (SIMULATED)' if report.simulated else ''}. Globs (*, ?) are allowed in every field.\n"
    )
    try:
        Path(path).write_text(header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror}.") from None
    return len(data["expected_failures"])


def _first_line(value: Any) -> str:
    text = str(value).strip()
    return text.splitlines()[0] if text else ""
