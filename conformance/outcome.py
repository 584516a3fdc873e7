"""The one rule that turns what happened to an item into a Status; every suite uses it.

A suite observes one of a closed set of things and hands it to `status_of`:

    observation                                   status
    Missing(reason)        the backend lacks a capability the item needs
                           (a dtype, an FP8 format it claims none of)  UNSUPPORTED
    NotApplicable(reason)  nothing to judge: no samples, not an op of
                           this build, no CPU reference can exist      SKIP
    ReferenceFailed(text)  the CPU reference (or making inputs) raised REF_ERROR
    CompileRejected(op)    the backend compiler refused a graph for
                           one op (compile mode)                       UNSUPPORTED
    an exception           the device raised; a missing kernel or dtype
                           in the backend's words (`classify_exception`) UNSUPPORTED
                           anything else                               ERROR
    a Comparison           not ok (conformance/numerics/)              MISMATCH
                           ok, an op ran through the CPU fallback      FALLBACK
                           ok                                          PASS

CRASH and TIMEOUT are the engine's: the worker died or was killed, so no suite saw it.
A backend that lacks a kernel says so in a handful of recognisable ways (c10's "Could
not run ... with arguments from the ... backend", "not implemented for 'BFloat16'",
"... is not supported ..."); everything else it raises is an ERROR: the op exists but broke.
"""

from __future__ import annotations

import dataclasses
import re
import signal
from typing import TYPE_CHECKING, Union

from op_db.records import Result, Status, WorkItem, shorten

if TYPE_CHECKING:  # numerics imports torch; the engine's parent imports this module before it
    from conformance.numerics import Comparison

# Lower-cased phrases that mean "the backend has no kernel for this op/dtype".
UNSUPPORTED_MARKERS = (
    "not implemented for",
    "not supported",
    "could not run",
    "doesn't support",
    "does not support",
    "no kernel",
    "is not currently supported",
    "not currently implemented",
)
_UNSUPPORTED_RE = re.compile("|".join(re.escape(m) for m in UNSUPPORTED_MARKERS))


@dataclasses.dataclass(frozen=True)
class Missing:
    """The backend lacks a capability the item needs (a dtype, a format)."""

    reason: str


@dataclasses.dataclass(frozen=True)
class NotApplicable:
    """There is nothing to judge (no samples, unknown subject, no reference can exist)."""

    reason: str


@dataclasses.dataclass(frozen=True)
class ReferenceFailed:
    """The CPU side failed: says nothing about the backend."""

    reason: str


@dataclasses.dataclass(frozen=True)
class RegistrationFailed:
    """The op is registered wrongly for the device (opcheck failed, a recompile it must not
    need): an ERROR whatever its words, which may name a missing kernel of a tracing key."""

    reason: str


@dataclasses.dataclass(frozen=True)
class CompileRejected:
    """The backend compiler refused a graph because of one op (conformance/compiling/failures.py)."""

    op: str
    phase: str
    reason: str


Observation = Union[Missing, NotApplicable, ReferenceFailed, RegistrationFailed, CompileRejected, BaseException, "Comparison"]

# The rule as data, in the order `status_of` applies it (the manual's status page prints it).
RULES: tuple[tuple[str, Status], ...] = (
    ("Missing: the backend lacks the item's dtype or format", Status.UNSUPPORTED),
    ("NotApplicable: no samples, unknown subject, no CPU reference exists", Status.SKIP),
    ("ReferenceFailed: the CPU reference or the inputs failed", Status.REF_ERROR),
    ("RegistrationFailed: a custom op is registered wrongly (opcheck)", Status.ERROR),
    ("CompileRejected: the backend compiler refused a graph for one op", Status.UNSUPPORTED),
    ("exception on the device naming a missing kernel or dtype", Status.UNSUPPORTED),
    ("any other exception on the device", Status.ERROR),
    ("Comparison outside the numerics rule", Status.MISMATCH),
    ("Comparison within the rule, an op ran through the CPU fallback", Status.FALLBACK),
    ("Comparison within the rule", Status.PASS),
)

# What the engine decides for an item no suite could judge (conformance/engine/).
ENGINE_RULES: tuple[tuple[str, Status], ...] = (
    ("the worker died while running the item (signal, abort, OOM kill)", Status.CRASH),
    ("the item ran past its --timeout; its worker was killed", Status.TIMEOUT),
)


def status_of(observed: Observation, *, fallback: bool = False) -> Status:
    """The Status of an item from what it observed (see the table above). `fallback`: some op of
    the item ran through the backend's CPU fallback; it only matters for a passing comparison."""
    if isinstance(observed, (Missing, CompileRejected)):
        return Status.UNSUPPORTED
    if isinstance(observed, NotApplicable):
        return Status.SKIP
    if isinstance(observed, ReferenceFailed):
        return Status.REF_ERROR
    if isinstance(observed, RegistrationFailed):
        return Status.ERROR
    if isinstance(observed, BaseException):
        return classify_exception(observed)
    from conformance.numerics import Comparison

    if isinstance(observed, Comparison):
        if not observed.ok:
            return Status.MISMATCH
        return Status.FALLBACK if fallback else Status.PASS
    raise TypeError(f"not an observation: {type(observed).__name__}")


def result_for(item: WorkItem, observed: Observation, *, fallback: bool = False, **fields) -> Result:
    """The item's Result for `observed`: its status by `status_of`, and as message the
    observation's reason or the exception's text (unless `fields` give one)."""
    if "message" not in fields:
        if isinstance(observed, BaseException):
            fields["message"] = shorten(describe_exception(observed))
        elif isinstance(observed, (Missing, NotApplicable, ReferenceFailed, RegistrationFailed, CompileRejected)):
            fields["message"] = shorten(observed.reason)
        else:  # a Comparison: its reason says what failed; a pass may carry a note (numerics rule 6)
            fields["message"] = shorten(observed.reason if not observed.ok else observed.note) or None
    if isinstance(observed, CompileRejected) and not fields.get("failing_op"):
        fields["failing_op"] = observed.op
    return Result.for_item(item, status_of(observed, fallback=fallback), **fields)


def classify_exception(exc: BaseException) -> Status:
    """UNSUPPORTED for a missing kernel or dtype, ERROR for any other device failure."""
    if isinstance(exc, NotImplementedError):
        return Status.UNSUPPORTED
    if _UNSUPPORTED_RE.search(str(exc).lower()):
        return Status.UNSUPPORTED
    return Status.ERROR


def describe_exception(exc: BaseException) -> str:
    """'RuntimeError: text' on one logical line (the first line of the text and the type)."""
    text = str(exc).strip() or repr(exc)
    return f"{type(exc).__name__}: {text}"


def signal_name(exitcode: int | None) -> str:
    """'SIGSEGV' for a process killed by signal 11 (multiprocessing reports -11)."""
    if exitcode is None:
        return "unknown"
    if exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"
