"""The OpInfo suite: run one PyTorch OpInfo op in one dtype on the device and judge it.

For each sample (made on CPU with a fixed seed): move a copy to the device, run the CPU
reference, run the op on the device (recording the aten overloads it hits and any CPU
fallback), compare with the numerics rule; a float64 oracle of the same sample is
computed only when the plain tolerance check fails (the rule needs it only then, and it
would otherwise double the CPU work). The backward variant does the same with the
gradients of every input that requires grad, for one fixed random cotangent per output.
The steps are conformance/opinfo/steps.py; this module folds the samples into one Result
through the outcome rule (conformance/outcome.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from conformance.engine.config import WorkerContext
from conformance.numerics import Comparison
from conformance.opinfo import checks as chk
from conformance.opinfo import samples as smp
from conformance.opinfo import steps
from conformance.outcome import Missing, NotApplicable, ReferenceFailed, describe_exception, result_for
from conformance.planning import OpsOptions
from op_db.records import Result, WorkItem, shorten

SUITE = "opinfo"


def preload() -> None:
    """The slow import (seconds), done by a prestarted worker before it knows its run."""
    import torch.testing._internal.common_methods_invocations  # noqa: F401


def prepare(ctx: WorkerContext) -> None:
    """Import PyTorch's op database once per worker and index it by full name."""
    from torch.testing._internal.common_methods_invocations import op_db

    # OpInfo samples are tiny tensors: intra-op threads buy nothing there, and their OpenMP
    # barriers cost 10-20x on kernels like max_pool2d when the cores are busy (other workers,
    # other jobs), so one thread per worker; the worker count is what uses the cores.
    torch.set_num_threads(1)
    _skip_test_case_lookup()
    _seed_random_ops_directly(ctx.adapter)
    ctx.state[SUITE] = {op.full_name: op for op in op_db}


def _no_test_case() -> None:
    return None


def _skip_test_case_lookup() -> None:
    """OpInfo's sample generators look for the unittest.TestCase that called them (for its
    sample-specific skips and input tracking) with inspect.stack(), which reads the source of
    every frame: ~5 ms per item, more than many items' whole run. No TestCase ever calls them
    here, so the lookup's answer is always None; give it without walking the stack."""
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    for module in (common_utils, core):
        if hasattr(module, "extract_test_fn"):
            module.extract_test_fn = _no_test_case


def _seed_random_ops_directly(adapter: Any) -> None:
    """OpInfo runs its random ops (dropout, the in-place samplers) through wrapper_set_seed,
    which seeds with torch.manual_seed(42): that also queues a lazy seeding of CUDA, XPU and
    MTIA, each with a captured stack (traceback.format_stack), ~0.4 ms a call, 1,077 calls in
    the fp32 sweep. The same wrapper seeding the CPU generator and the device's directly
    draws the same numbers on both, inside the same saved and restored RNG state. The wrapper
    is module state and seeds one adapter's device: a process that runs items for another
    adapter (tests do) installs it again for that one."""
    from torch.testing._internal import common_methods_invocations

    if getattr(common_methods_invocations.wrapper_set_seed, "seeds_adapter", None) is adapter:
        return
    from torch.testing._utils import freeze_rng_state

    def wrapper_set_seed(op: Any, *args: Any, **kwargs: Any) -> Any:
        with freeze_rng_state():
            adapter.manual_seed(42)  # OpInfo's own seed
            return op(*args, **kwargs)

    wrapper_set_seed.seeds_adapter = adapter  # type: ignore[attr-defined]
    common_methods_invocations.wrapper_set_seed = wrapper_set_seed


def run_item(item: WorkItem, ctx: WorkerContext, subject: str | None = None,
             device_fn: Callable[[steps.ItemSetup], Any] | None = None) -> Result:
    """`subject`: the OpInfo full name when it is not the item's own; `device_fn(setup)`: what
    runs each sample on the device instead of the op itself (the dist suite's DTensor run)."""
    subject = subject or item.subject
    _seed_random_ops_directly(ctx.adapter)
    op = ctx.state[SUITE].get(subject)
    if op is None:
        return result_for(item, NotApplicable(f"{subject} is not an OpInfo op in this torch build."))
    if chk.cuda_only(op):
        return result_for(item, NotApplicable(f"OpInfo marks {subject} CUDA-only (onlyCUDA): "
                                              "there is no CPU reference to compare with."))
    dtype = getattr(torch, item.dtype)
    claimed = chk.claimed(op, dtype, ctx.device_type)
    if not ctx.adapter.dtype_supported(item.dtype):
        return result_for(item, Missing(f"the {ctx.device} backend does not support {item.dtype}."), claimed=claimed)
    setup, tally = steps.setup_item(op, dtype, backward=item.variant == "backward", compiled=item.mode == "compile",
                                    ctx=ctx, options=ctx.config.options_of(OpsOptions))
    if device_fn is not None:
        setup = dataclasses.replace(setup, device_fn=device_fn(setup))
    try:
        samples = steps.make_samples(setup)
    except Exception as exc:  # sample generation is pure CPU work: the reference failed
        return result_for(item, ReferenceFailed(f"making samples: {describe_exception(exc)}"), claimed=claimed)
    if not samples:
        kind = "differentiable " if setup.backward else ""
        return result_for(item, NotApplicable(f"OpInfo has no {kind}samples for {item.dtype}."), claimed=claimed)
    # Seed CPU and device once per item: the reference and the device run draw the same
    # amounts, so their streams stay in step sample after sample.
    ctx.adapter.manual_seed(ctx.config.seed)
    return _fold(item, setup, tally, samples, claimed)


def _fold(item: WorkItem, setup: steps.ItemSetup, tally: steps.ItemTally, samples: list[Any], claimed: bool) -> Result:
    """Run the samples and fold them into one Result: the first device exception ends the item."""
    ran = passed = ref_errors = 0
    first_failure = message = failing_op = None
    error: BaseException | None = None
    ref_failure: ReferenceFailed | None = None
    for index, sample in enumerate(samples):
        outcome = steps.run_sample(setup, tally, index, sample)
        if outcome == steps.NO_GRAD:
            continue
        ran += 1
        if isinstance(outcome, ReferenceFailed):
            ref_errors, ref_failure = ref_errors + 1, outcome
            continue
        if outcome.error is not None:
            error, failing_op = outcome.error, outcome.failing_op
            first_failure, message = smp.describe_sample(index, sample), describe_exception(outcome.error)
            break
        if outcome.comparison.ok:
            passed += 1
        elif first_failure is None:
            first_failure = smp.describe_sample(index, sample)
            message, failing_op = outcome.comparison.reason, chk.guess_failing_op(outcome.ops)
    judged = steps.item_numerics(setup, tally)  # folds every sample's ulp statistics into tally.total
    observed: Any
    phase = None
    if error is not None and setup.compiled:
        from conformance.opinfo.compiled import failure_observation

        observed, phase = failure_observation(setup, error)
    elif error is not None:
        observed = error
    elif ran == 0:
        observed = NotApplicable(f"OpInfo has no differentiable samples for {item.dtype}.")
    elif ref_errors == ran:
        observed = ref_failure
    else:
        observed = judged
    if tally.cpu_missing:  # rule 6: no CPU kernel in the dtype, judged against the oracle
        if isinstance(observed, Comparison):
            observed = dataclasses.replace(observed, note="; ".join(n for n in (tally.cpu_missing, observed.note) if n))
        if message is not None:
            message = f"{message}; {tally.cpu_missing if error is None else 'the CPU has no kernel in this dtype either'}"
    total = tally.total or Comparison(True, "exact")
    fields: dict[str, Any] = dict(
        samples=ran, samples_passed=passed, first_failure=shorten(first_failure, 400), failing_op=failing_op,
        aten_ops=dict(sorted(tally.aten_ops.items())), fallback_ops=sorted(tally.fallbacks), check=_check_name(setup, tally),
        extra=_extra(setup, tally, ref_errors), claimed=claimed,
        max_abs_err=total.max_abs_err if tally.total else None, max_rel_err=total.max_rel_err if tally.total else None,
        err_ratio=total.err_ratio if tally.total else None,
        numerics=total.numerics.to_dict() if total.numerics is not None else {},
    )
    if setup.compiled:
        from conformance.opinfo.compiled import compile_fields, mismatch_note

        fields.update(compile_fields(setup, tally, phase))
        if message is not None and error is None and first_failure is not None:
            message += mismatch_note(tally, setup.device)
        if phase is not None:
            from conformance.compiling.failures import describe_failure

            message = f"{phase}: {describe_failure(error)}"
    if message is not None:
        fields["message"] = shorten(message)
    return result_for(item, observed, fallback=bool(tally.fallbacks), **fields)


def _check_name(setup: steps.ItemSetup, tally: steps.ItemTally) -> str:
    if setup.meta_only or tally.kind == "undefined":
        return "shape-dtype-device"
    return "random-range" if "random-range" in tally.checks else "numerics"


def _extra(setup: steps.ItemSetup, tally: steps.ItemTally, ref_errors: int) -> dict[str, Any]:
    extra: dict[str, Any] = {"op_time_s": round(tally.op_time, 6)}
    if setup.compiled:
        extra["compile_backend"] = setup.compile_backend
    if ref_errors:
        extra["ref_errors"] = ref_errors
    if setup.rtol is not None or setup.atol is not None:
        extra["tolerance_override"] = {"rtol": setup.rtol, "atol": setup.atol}
    return extra
