"""The vocabulary every package shares: statuses, work items and results.

This module imports nothing heavy; the store, the conformance suites and the
reports all speak in these types (DESIGN.md, "Data flow of a conformance run").
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, NamedTuple


class Status(str, enum.Enum):
    """The closed set of outcomes of one work item."""

    PASS = "PASS"
    MISMATCH = "MISMATCH"
    FALLBACK = "FALLBACK"
    UNSUPPORTED = "UNSUPPORTED"
    ERROR = "ERROR"
    CRASH = "CRASH"
    TIMEOUT = "TIMEOUT"
    SKIP = "SKIP"
    REF_ERROR = "REF_ERROR"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, text: str) -> "Status":
        from op_db.errors import InputError

        try:
            return cls(text.strip().upper())
        except ValueError:
            known = ", ".join(s.value for s in cls)
            raise InputError(f"unknown status {text!r}; known statuses: {known}.") from None


# What each status means, in the words of every report and of the manual's status page.
STATUS_MEANINGS: dict[Status, str] = {
    Status.PASS: "ran on the device, every sample within the numerics rule",
    Status.MISMATCH: "ran, at least one sample outside the numerics rule",
    Status.FALLBACK: "results right, but at least one op ran through the backend's CPU fallback",
    Status.UNSUPPORTED: "the backend has no kernel or lacks the dtype (NotImplementedError, "
                        "\"not implemented for\", dtype not supported)",
    Status.ERROR: "any other exception on the device while the CPU succeeded",
    Status.CRASH: "the worker process died (signal, abort, OOM kill)",
    Status.TIMEOUT: "the item exceeded its time limit; the worker was killed",
    Status.SKIP: "not applicable (no samples for this dtype, excluded, no reference can exist), "
                 "with the reason",
    Status.REF_ERROR: "the CPU reference itself failed; says nothing about the backend",
}

# Statuses that say the backend ran the item correctly.
WORKING = frozenset({Status.PASS, Status.FALLBACK})
# Statuses that count against the backend (SKIP and REF_ERROR say nothing about it).
FAILING = frozenset(
    {Status.MISMATCH, Status.UNSUPPORTED, Status.ERROR, Status.CRASH, Status.TIMEOUT}
)
STATUS_ORDER = tuple(Status)


class WorkItem(NamedTuple):
    """One unit of work: e.g. ("opinfo", "mul", "forward", "bfloat16", "eager")."""

    suite: str
    subject: str
    variant: str
    dtype: str
    mode: str

    @property
    def test_id(self) -> str:
        """The dotted name used by JUnit and logs: opinfo.mul.forward.bfloat16.eager."""
        return ".".join(self)


@dataclasses.dataclass
class Result:
    """One row per WorkItem (DESIGN.md, "A Result is one row per WorkItem").

    Beyond the design's fields: `aten_ops` maps each overload to its hit count;
    `claimed` says whether the suite's own metadata claims the dtype for the
    device (None when unknown); `check` names the comparison applied (for
    example "numerics", "shape-dtype-device", "random-range", "exact");
    `divergence` names the first divergent module of a model; `extra` holds
    suite-specific facts that reports may show but never interpret; `compile`
    holds a compile-mode item's compile facts; `node` names the cluster node that ran the item
    (Ray executor: "IP/node id", with the device Ray pinned), None when it ran on the run's own host.
    """

    suite: str
    subject: str
    variant: str
    dtype: str
    mode: str
    status: Status
    samples: int = 0
    samples_passed: int = 0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    err_ratio: float | None = None
    first_failure: str | None = None
    message: str | None = None
    failing_op: str | None = None
    aten_ops: dict[str, int] = dataclasses.field(default_factory=dict)
    fallback_ops: list[str] = dataclasses.field(default_factory=list)
    duration_s: float = 0.0
    claimed: bool | None = None
    check: str | None = None
    divergence: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    # ulp statistics vs the float64 oracle (conformance.numerics.ulp.Numerics.to_dict), {} when not measured
    numerics: dict[str, Any] = dataclasses.field(default_factory=dict)
    # compile mode: graph_breaks, break_reasons, recompiles, compile_s, graph_ops, phase, vs_eager
    # (conformance/compiling/watch.py, CompileFacts); empty for eager items
    compile: dict[str, Any] = dataclasses.field(default_factory=dict)
    node: str | None = None

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    @property
    def item(self) -> WorkItem:
        return WorkItem(self.suite, self.subject, self.variant, self.dtype, self.mode)

    @classmethod
    def for_item(cls, item: WorkItem, status: Status, **fields: Any) -> "Result":
        return cls(*item, status=status, **fields)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["status"] = self.status.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Result":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(Result))

# How a device rounds into an output dtype (Result.numerics["rounding"], conformance.numerics.ulp).
ROUNDING_CLASSES = ("nearest-even", "toward-zero", "stochastic", "double-rounding", "unknown")
EXPECTABLE_ROUNDING = ROUNDING_CLASSES[:-1]


def parse_rounding(text: str) -> str:
    """A rounding class a user may expect (`--expect-rounding`), or InputError naming them all."""
    from op_db.errors import InputError

    name = text.strip().lower().replace("_", "-")
    if name not in EXPECTABLE_ROUNDING:
        raise InputError(f"unknown rounding class {text!r}; known classes: {', '.join(EXPECTABLE_ROUNDING)}.")
    return name

MESSAGE_LIMIT = 2000


def shorten(text: str | None, limit: int = MESSAGE_LIMIT) -> str | None:
    """Cut long exception text so a result never carries a tensor dump."""
    if text is None:
        return None
    text = str(text).strip()
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    return f"{text[:head]} ... [{len(text) - limit} chars cut] ... {text[-(limit - head):]}"
