"""What a scan produces: findings, the effort summary, the result, the error."""

from __future__ import annotations

import dataclasses
from typing import Any

from op_db.errors import InputError

from .rules import EFFORTS, SEVERITIES


class ScanError(InputError):
    """The file cannot be scanned (missing, a directory, not UTF-8, not Python)."""


@dataclasses.dataclass(frozen=True)
class Finding:
    """One place in a script that ties it to CUDA.

    Positions are 1-based: ``line``/``col`` is the first character of the
    offending code, ``end_line``/``end_col`` the character just after it.
    """

    rule_id: str
    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    source_line: str
    severity: str
    effort: str
    message: str
    fixable: bool
    family: str

    def sort_key(self) -> tuple[int, int, str]:
        return (self.line, self.col, self.rule_id)

    def to_dict(self) -> dict[str, Any]:
        # every field is a str, int or bool: no deep copy needed (dataclasses.asdict's cost)
        return {name: getattr(self, name) for name in FINDING_FIELDS}

    def __str__(self) -> str:
        fix = " [fixable]" if self.fixable else ""
        return f"{self.path}:{self.line}:{self.col}: {self.rule_id} {self.severity}: {self.message}{fix}"


FINDING_FIELDS = tuple(f.name for f in dataclasses.fields(Finding))


@dataclasses.dataclass(frozen=True)
class EffortSummary:
    """Overall porting effort: the highest effort of any finding, and counts."""

    overall: str
    by_effort: dict[str, int]
    by_severity: dict[str, int]
    total: int
    fixable: int

    @classmethod
    def of(cls, findings: list[Finding]) -> EffortSummary:
        by_effort = {e: 0 for e in EFFORTS}
        by_severity = {s: 0 for s in SEVERITIES}
        for f in findings:
            by_effort[f.effort] += 1
            by_severity[f.severity] += 1
        overall = max((f.effort for f in findings), key=EFFORTS.index, default="none")
        return cls(overall, by_effort, by_severity, len(findings), sum(f.fixable for f in findings))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ScanResult:
    path: str
    findings: list[Finding]
    lines: int

    @property
    def effort(self) -> EffortSummary:
        return EffortSummary.of(self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "lines": self.lines, "effort": self.effort.to_dict(),
                "findings": [f.to_dict() for f in self.findings]}
