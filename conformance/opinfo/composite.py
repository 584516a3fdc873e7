"""Rule 6 of the numerics rule for the OpInfo suite (DESIGN.md): a correct implementation is
never a MISMATCH. Used by conformance/opinfo/steps.py, each only when the plain rule fails:

    replay_of               the device's recorded op sequence, to be replayed on the CPU
                            (conformance/reference/replay.py): the second reference
    DeviceSequence          that replay, and a rerun on the device keeping each call's inputs
                            and outputs, on demand and once per sample
    against_composite       rules 2-3 once more against the second reference, provided every
                            primitive passes alone (conformance/reference/primitives.py)
    lean_against_composite  rule 5 weighs the device's lean against the second reference's
    reference_from_oracle   no CPU kernel in the dtype: the float64 oracle rounded into the
                            dtype stands in for the CPU's result
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.numerics import Comparison, compare
from conformance.numerics.oracle import rounded_oracle
from conformance.numerics.rule import numerics_against
from conformance.opinfo import checks as chk
from conformance.opinfo import samples as smp
from conformance.opinfo.item import COTANGENT_SEED_OFFSET, NO_GRAD, ItemSetup, ItemTally, Reference, call, grads
from conformance.reference.oprecord import OpRecorder
from conformance.reference.replay import replay
from conformance.outcome import classify_exception, describe_exception
from op_db.records import Status


def replay_of(calls: list, out: Any, device_type: str) -> Callable[[], Any]:
    return lambda: replay(calls, out, device_type)


_NOT_YET = object()


class DeviceSequence:
    """What rule 6 asks of one sample's device run, each on demand and once: `on_cpu()` the
    device's recorded op sequence replayed on the CPU (None: unavailable); `calls()` the
    sequence run again on the device with each call's inputs and outputs kept (CPU snapshots)."""

    def __init__(self, replay: Callable[[], Any], rerun: Callable[[], list]):
        self._replay, self._rerun = replay, rerun
        self._on_cpu: Any = _NOT_YET

    def on_cpu(self) -> Any:
        if self._on_cpu is _NOT_YET:
            self._on_cpu = self._replay()
        return self._on_cpu

    def calls(self) -> list:
        return self._rerun()


def against_composite(setup: ItemSetup, dev: Any, ref: Any, hi: Any, sequence: DeviceSequence,
                       result: Comparison) -> Comparison:
    """Rule 6: the sample judged once more with the device's own op sequence, replayed on the
    CPU, as a second reference, provided each primitive of that sequence passes on its own;
    `result` stands where there is no second reference or it equals the CPU's."""
    second = sequence.on_cpu()
    if second is None or chk.identical(second, ref):
        return result
    judged = compare(dev, ref, hi, rtol=setup.rtol, atol=setup.atol, composite=smp.plain_sizes(second),
                     bias_rule=setup.expect_rounding is None)
    if not judged.ok:
        return judged
    from conformance.reference.primitives import judge_primitives

    primitives = judge_primitives(sequence.calls(), setup.device_type)
    if primitives.ok:
        return judged
    return dataclasses.replace(result, rule=primitives.rule, reason=f"{result.reason}; {primitives.reason}")


def lean_against_composite(setup: ItemSetup, dev: Any, ref: Any, hi: Any, sequence: DeviceSequence,
                            result: Comparison) -> Comparison:
    """Rule 6 for rule 5: a device running its own op sequence leans as that sequence does on
    the CPU (chunked accumulation in the low dtype leans toward zero), so its lean is weighed
    against the sequence's, provided each primitive passes on its own."""
    second = sequence.on_cpu()
    if second is None or chk.identical(second, ref):
        return result
    numerics = numerics_against(dev, smp.plain_sizes(second), hi)
    if numerics is None:
        return result
    reason = numerics.verdict() if setup.expect_rounding is None else None
    if reason:
        return dataclasses.replace(result, ok=False, rule="bias", reason=reason, numerics=numerics)
    from conformance.reference.primitives import judge_primitives

    primitives = judge_primitives(sequence.calls(), setup.device_type)
    if not primitives.ok:
        return dataclasses.replace(result, ok=False, rule=primitives.rule, reason=primitives.reason)
    note = result.note or "leans as the device's own op sequence does when run on the CPU (composite implementation)"
    return dataclasses.replace(result, ok=True, rule="composite", reason="", numerics=numerics, note=note)


def rerun_with_snapshots(setup: ItemSetup, dev_sample: Any, cotangents: list[torch.Tensor] | None) -> list:
    """The sample once more on the device, every aten call's inputs and outputs kept (rule 6
    judges each primitive alone); [] when the run raises this time."""
    recorder = OpRecorder(setup.device_type, keep_calls="snapshots")
    scratch = ItemTally(kind="deterministic")  # not the item's op time
    try:
        with recorder:
            out = call(setup, scratch, setup.device_fn, dev_sample)
            if setup.backward:
                grads(scratch, out, dev_sample, cotangents)
            setup.adapter.synchronize()
    except Exception:
        return []
    return recorder.calls



def reference_from_oracle(setup: ItemSetup, tally: ItemTally, sample: Any, error: BaseException) -> Reference | str | None:
    """Where the CPU has no kernel in the item's dtype but the float64 oracle runs: the oracle
    rounded to nearest even into the dtype stands in for the CPU's result (rule 6), so the
    device is held to the dtype's own bound. None where the CPU failed otherwise or the
    oracle fails too (the item is then REF_ERROR); NO_GRAD as `run_reference` says it."""
    if setup.oracle_dtype is None or classify_exception(error) is not Status.UNSUPPORTED:
        return None
    hi_sample = smp.to_oracle(sample, setup.dtype, setup.oracle_dtype)
    stream = torch.default_generator.get_state()  # the CPU's stream as the failed reference left it
    try:
        torch.default_generator.manual_seed(setup.seed)
        hi = call(setup, tally, setup.op, hi_sample)
        cotangents = None
        if setup.backward:
            outs = smp.differentiable_outputs(hi)
            if not outs or not smp.grad_inputs(hi_sample):
                return NO_GRAD
            gen = torch.Generator().manual_seed(setup.seed + COTANGENT_SEED_OFFSET)
            # Drawn as the CPU reference draws them, in the item's dtype.
            cotangents = [torch.randn(o.shape, generator=gen, dtype=setup.dtype) for o in outs]
            hi = grads(tally, hi, hi_sample, cotangents)
    except Exception:
        return None
    finally:
        torch.default_generator.set_state(stream)
    narrow = lambda t: rounded_oracle(t, setup.dtype) if isinstance(t, torch.Tensor) and t.dtype == setup.oracle_dtype else t  # noqa: E731
    return Reference(pytree.tree_map(narrow, hi), cotangents, oracle=hi, cpu_missing=describe_exception(error))


def cpu_missing_note(setup: ItemSetup, reference: Reference) -> str:
    dtype = str(setup.dtype).removeprefix("torch.")
    return (f"the CPU has no kernel in {dtype} ({reference.cpu_missing}): judged against the float64 oracle "
            f"rounded into {dtype}")
