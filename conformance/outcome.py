"""Turning what happened on the device into a Status; shared by every suite.

A backend that lacks a kernel says so in a handful of recognisable ways
(c10's "Could not run ... with arguments from the ... backend", "not
implemented for 'BFloat16'", "... is not supported ..."); everything else it
raises is an ERROR: the op exists but broke.
"""

from __future__ import annotations

import re
import signal

from op_db.records import Status

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
