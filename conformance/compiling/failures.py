"""What a compile-mode failure was: its phase, and the op a backend compiler refused.

    trace  dynamo failed to capture the code (fullgraph graph break, an op's fake kernel raised)
    lower  the backend compiler failed on a captured graph (BackendCompilerFailed)
    run    the compiled code (or the eager code between graphs) raised when it ran

A lowering failure caused by one op is UNSUPPORTED with `failing_op` (outcome.CompileRejected):
the sim backend names it (`conformance.sim.compiler.CompileUnsupported`); Inductor's
LoweringException and missing-lowering errors name it as `target: aten....`.
"""

from __future__ import annotations

import re

from conformance.outcome import CompileRejected

TRACE, LOWER, RUN = "trace", "lower", "run"
_TARGET = re.compile(r"target:\s*((?:aten|prims|quantized|_c10d_functional|[A-Za-z_][\w]*)\.[\w.]+)")


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__


def phase_of(exc: BaseException, *, lowering: bool, graph_ran: bool) -> str:
    """`lowering`: the exception left a backend compile; `graph_ran`: some compiled graph ran."""
    from torch._dynamo import exc as dynamo_exc

    if isinstance(exc, dynamo_exc.BackendCompilerFailed) or lowering:
        return LOWER
    if isinstance(exc, dynamo_exc.TorchDynamoException):  # raised by dynamo itself, while capturing
        return TRACE
    return RUN


def refused_op(exc: BaseException) -> str | None:
    """The op a backend compiler names as the cause of its failure, if it names one."""
    for link in _chain(exc):
        op = getattr(link, "refused_op", None)
        if op:
            return str(op)
        target = getattr(link, "target", None)
        if target is not None and type(link).__name__ in ("LoweringException", "MissingOperatorWithoutDecomp",
                                                          "MissingOperatorWithDecomp"):
            return str(target)
    found = _TARGET.search(str(exc))
    return found.group(1) if found else None


def observe_failure(exc: BaseException, phase: str):
    """The observation for outcome.status_of: CompileRejected when lowering refused one op,
    else the exception itself (classified like any device exception)."""
    if phase == LOWER:
        op = refused_op(exc)
        if op is not None:
            return CompileRejected(op=op, phase=phase, reason=_first_line(exc))
    return exc


def describe_failure(exc: BaseException) -> str:
    """'Type: text' of what failed, on one line: the backend's own exception rather than
    dynamo's wrapper, and none of dynamo's boilerplate (user-code excerpt, verbosity hints)."""
    from torch._dynamo import exc as dynamo_exc

    if isinstance(exc, dynamo_exc.BackendCompilerFailed) and getattr(exc, "inner_exception", None) is not None:
        exc = exc.inner_exception
    text = str(exc).split("\nfrom user code:")[0].split("\nSet TORCHDYNAMO_VERBOSE")[0]
    return f"{type(exc).__name__}: {' '.join(text.split())}"[:_LIMIT]


_LIMIT = 600


def _first_line(exc: BaseException) -> str:
    return describe_failure(exc)
