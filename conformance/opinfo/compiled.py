"""Compile mode of an OpInfo item: the second reference and the item's compile facts.

A compiled op is judged against the CPU like eager (steps.compare_sample). Eager on the same
device is the second reference: each deterministic sample also runs eagerly on the device,
so a compile-only numerics bug (compiled differs, eager agrees with the CPU) is told apart
from an eager one. A failure gets its phase (trace, lower, run) from the item's
CompileWatch; a lowering refused for one op is UNSUPPORTED naming it (compiling/failures.py).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

from conformance.compiling.failures import observe_failure
from conformance.numerics import Comparison, compare
from conformance.opinfo import samples as smp


def check_against_eager(setup: Any, tally: Any, run: Any, reference: Any, eager: Callable[[], Any] | None) -> None:
    """Compare the compiled output with `eager()`, the sample run eagerly on the device. Random
    ops are left out: an extra draw would put the device stream out of step with the CPU's."""
    if tally.kind != "deterministic" or eager is None:
        return
    try:
        eager_out = smp.to_cpu(eager(), setup.adapter)
    except Exception:  # noqa: BLE001 - eager failing where compiled ran is a fact, not this item's error
        tally.eager_failed += 1
        return
    against = compare(run.output, eager_out, rtol=setup.rtol, atol=setup.atol)
    tally.vs_eager = against if tally.vs_eager is None else tally.vs_eager.merge(against)
    if not run.comparison.ok and tally.eager_agrees_with_cpu is None:  # the first failing sample's
        tally.eager_agrees_with_cpu = compare(eager_out, reference.output, rtol=setup.rtol, atol=setup.atol).ok


def failure_observation(setup: Any, error: BaseException) -> tuple[Any, str]:
    """What outcome.status_of is given for a compile-mode device failure, and its phase."""
    phase = setup.watch.failure_phase(error)
    return observe_failure(error, phase), phase


def compile_fields(setup: Any, tally: Any, phase: str | None) -> dict[str, Any]:
    """The item's `compile` record and the aten ops that reached the backend compiler."""
    facts = setup.watch.facts(phase=phase)
    if tally.vs_eager is not None or tally.eager_failed:
        vs = tally.vs_eager or Comparison(True, "exact")
        facts.vs_eager = {"ok": vs.ok, "max_abs_err": vs.max_abs_err, "eager_failed": tally.eager_failed}
        if tally.eager_agrees_with_cpu is not None:
            facts.vs_eager["eager_matches_cpu"] = tally.eager_agrees_with_cpu
    return {"compile": facts.to_dict(), "aten_ops": {op: 1 for op in facts.graph_ops}}


def mismatch_note(tally: Any, device: str) -> str:
    """Which side a compiled mismatch is on, from eager on the same device."""
    if tally.eager_agrees_with_cpu is True:
        return f" [compile only: eager on {device} agrees with the CPU]"
    if tally.eager_agrees_with_cpu is False:
        return f" [eager on {device} differs from the CPU too]"
    return ""


def compiled_op(op: Any, ctx: Any) -> tuple[Any, Any]:
    """The item's CompileWatch and the op compiled under it; one compiled callable serves every
    sample, so samples of one shape reuse one compiled graph."""
    import torch._dynamo as dynamo

    from conformance.compiling.watch import CompileWatch

    dynamo.reset()  # each item compiles afresh: no cache growth across a long run
    watch = CompileWatch(ctx.compile_backend, ctx.config.compile)

    def call(*args, **kwargs):
        return op(*args, **kwargs)

    # Without --dynamic every shape is compiled statically (dynamo's automatic dynamic shapes off),
    # so a sample's result is that of a graph specialised to it, as OpInfo's inductor tests do.
    compiled = watch.compile(call, dynamic=True if ctx.config.compile.dynamic else False)

    def run(*args, **kwargs):
        with unseeded_random_ops():
            return compiled(*args, **kwargs)

    return watch, run


@contextlib.contextmanager
def unseeded_random_ops():
    """OpInfo's random ops call `wrapper_set_seed`, which reseeds inside the op; dynamo cannot
    trace the reseed and would run the op eagerly. Compiled, they draw unseeded, as PyTorch's
    own inductor OpInfo tests run them, and are judged by their value range."""
    from torch.testing._internal import common_methods_invocations as cmi

    seeded = cmi.wrapper_set_seed
    cmi.wrapper_set_seed = _call_unseeded
    try:
        yield
    finally:
        cmi.wrapper_set_seed = seeded


def _call_unseeded(op: Any, *args: Any, **kwargs: Any) -> Any:
    return op(*args, **kwargs)
