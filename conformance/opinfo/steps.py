"""The steps of one OpInfo item, each a function tests call on its own:

    setup_item      once per item: the op's tolerances, claims, output kind, the device callable
    make_samples    samples on the CPU, seeded
    run_reference   the op (and its gradients) on the CPU
    run_on_device   the op on the device, recorded; outputs brought back to the CPU
    compare_sample  the numerics rule with the float64 oracle (ulp statistics need it on every
                    deterministic sample with a floating output) and, where the CPU's
                    kernel alone would fail the device, the device's recorded op sequence
                    replayed on the CPU (rule 6); the metadata / value-range checks for
                    undefined and random outputs
    item_numerics   the ulp statistics of all samples together, judged once more (rule 5)

Compile mode (conformance/opinfo/compiled.py) compiles the op once per item under a
CompileWatch and checks each compiled output against eager on the same device as well.

`run_sample` chains them for one sample. Per-item state that the steps add to (op time,
ops seen, fallbacks) lives in an `ItemTally`; nothing is recomputed per sample that is
fixed per item.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from typing import Any

import numpy
import torch

from conformance.numerics import Comparison, compare, ulp
from conformance.opinfo import checks as chk
from conformance.opinfo import composite
from conformance.opinfo import samples as smp
from conformance.opinfo.item import (  # noqa: F401  (re-exported: the steps' vocabulary)
    _NOTHING, COTANGENT_SEED_OFFSET, IDENTICAL_ELEMENTS_MEASURED, NO_GRAD, RANDOMNESS_PROBE_SEED_OFFSET,
    DeviceRun, ItemSetup, ItemTally, Reference, call, grads, synchronize,
)
from conformance.reference.oprecord import OpRecorder
from conformance.outcome import ReferenceFailed, describe_exception
from op_db.records import shorten

def setup_item(op: Any, dtype: torch.dtype, *, backward: bool, compiled: bool, ctx: Any, options: Any) -> tuple[ItemSetup, ItemTally]:
    """Everything per item, once: tolerances, the device callable, the oracle's dtype."""
    device_type = ctx.device_type
    kind = chk.output_kind(op.full_name)
    meta_only = device_type == "meta"
    rtol, atol = chk.tolerance_overrides(op, dtype, device_type, backward)
    watch, device_fn = (None, op)
    if compiled:
        from conformance.opinfo.compiled import compiled_op

        watch, device_fn = compiled_op(op, ctx)
    setup = ItemSetup(
        op=op, dtype=dtype, device=ctx.device, device_type=device_type, adapter=ctx.adapter, backward=backward,
        compiled=compiled, compile_backend=ctx.compile_backend if compiled else None, seed=ctx.config.seed, reference_inputs=options.reference_inputs,
        max_samples=options.max_samples, rtol=rtol, atol=atol, meta_only=meta_only,
        oracle_dtype=None if meta_only or kind == "undefined" else smp.oracle_dtype(dtype),
        device_fn=device_fn, watch=watch, recorder=None if compiled else OpRecorder(device_type, keep_calls="references"),
        expect_rounding=options.expect_rounding, harness_time=ctx.harness_time,
    )
    return setup, ItemTally(kind=kind)


def make_samples(setup: ItemSetup, device: str = "cpu", limit: int | None = None) -> list[Any]:
    """The item's samples, the same in every run and every time they are made again (the
    randomness probe and the CPU-argument retry remake them)."""
    seed_sample_makers(setup.seed)
    maker = setup.op.reference_inputs if setup.reference_inputs else setup.op.sample_inputs
    samples = maker(device, setup.dtype, requires_grad=setup.backward, set_seed=False)
    limit = limit or setup.max_samples
    return list(itertools.islice(samples, limit) if limit else samples)


def seed_sample_makers(seed: int) -> None:
    """Seed what OpInfo's sample functions draw from: torch's CPU generator, and Python's
    `random` and NumPy's global generator, which some use directly (hinge_embedding_loss
    draws its margin with random.uniform). OpInfo's own iterator seeds all three before each
    sample; it is told not to (set_seed=False) because it seeds torch through
    torch.manual_seed, which queues a lazy seeding of every backend, milliseconds a call."""
    torch.default_generator.manual_seed(seed)
    random.seed(seed)
    numpy.random.seed(seed)


def run_reference(setup: ItemSetup, tally: ItemTally, sample: Any) -> Reference | str:
    """The CPU result of the sample (its input gradients for backward), or NO_GRAD."""
    ref = call(setup, tally, setup.op, sample)
    if not setup.backward:
        return Reference(ref, None)
    outs = smp.differentiable_outputs(ref)
    if not outs or not smp.grad_inputs(sample):
        return NO_GRAD
    gen = torch.Generator().manual_seed(setup.seed + COTANGENT_SEED_OFFSET)
    cotangents = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in outs]
    return Reference(grads(tally, ref, sample, cotangents), cotangents)


def run_on_device(setup: ItemSetup, tally: ItemTally, dev_sample: Any, cotangents: list[torch.Tensor] | None) -> DeviceRun:
    """The op (and gradients) on the device, its aten ops recorded; never raises."""
    run = DeviceRun()
    # Under torch.compile nothing is recorded (setup.recorder is None): Dynamo declines to
    # compile while a dispatch mode is active, which would test eager instead.
    recorder = setup.recorder
    if recorder is not None:
        recorder.reset()
    watching = _NOTHING if setup.watch is None else setup.watch
    with watching, _NOTHING if recorder is None else recorder, setup.adapter.track_fallbacks() as tracker:
        try:
            out = call(setup, tally, setup.device_fn, dev_sample)
            if setup.backward:
                out = grads(tally, out, dev_sample, cotangents)
            synchronize(setup, tally)
        except Exception as exc:
            run.error = exc
        finally:
            if recorder is not None:
                run.ops, run.failing_op = dict(recorder.ops), recorder.failing_op
                tally.aten_ops.update(recorder.ops)
    if tracker.ops:
        tally.fallbacks.update(tracker.ops)
    if run.error is None:
        if recorder is not None and recorder.keep_calls and not setup.meta_only:
            run.replay = composite.replay_of(recorder.calls, out, setup.device_type)
        run.placement = chk.wrong_device(out, setup.device_type)
        run.output = out if setup.meta_only else smp.to_cpu(out, setup.adapter)
    return run


def run_eagerly(setup: ItemSetup, tally: ItemTally, dev_sample: Any, cotangents: list[torch.Tensor] | None) -> Any:
    """Compile mode's second reference: the op itself, eagerly, on the device copy."""
    out = call(setup, tally, setup.op, dev_sample)
    return grads(tally, out, dev_sample, cotangents) if setup.backward else out


def retry_with_cpu_arguments(setup: ItemSetup, error: BaseException, index: int, sample: Any,
                             untouched: bool) -> Any | None:
    """Some sample functions keep an argument on the CPU on purpose (tensor_split's indices);
    moving it made the device refuse. The device copy with those left on the CPU, or None.
    `untouched`: the CPU reference left the sample's tensors as they were (no in-place write)."""
    if not smp.WANTS_CPU_ARGUMENT.search(str(error)) or not untouched:
        return None
    try:
        with torch.random.fork_rng(devices=[]):
            meta = make_samples(setup, "meta", limit=index + 1)[index]
        stay = smp.cpu_positions(meta)
    except Exception:
        return None
    return smp.to_device(sample, setup.device, stay, setup.adapter) if stay else None


def oracle_output(setup: ItemSetup, tally: ItemTally, sample: Any, untouched: bool,
                  cotangents: list[torch.Tensor] | None) -> Any:
    """The float64 result of the sample; None when the reference wrote its input in place
    (`untouched` False: version counters moved) or float64 fails: the rule then uses the
    plain check alone."""
    if not untouched:
        return None
    hi_sample = smp.to_oracle(sample, setup.dtype, setup.oracle_dtype)
    # Keep the CPU stream in step with the device's (fork_rng(devices=[]), minus its checks).
    stream = torch.default_generator.get_state()
    try:
        torch.default_generator.manual_seed(setup.seed)
        hi = call(setup, tally, setup.op, hi_sample)
        return grads(tally, hi, hi_sample, cotangents) if setup.backward else hi
    except Exception:
        return None
    finally:
        torch.default_generator.set_state(stream)


def compare_sample(setup: ItemSetup, tally: ItemTally, index: int, dev: Any, ref: Any, placement: str | None,
                   oracle: Any = None, sequence: Any = None) -> Comparison:
    """Judge one sample. `oracle()` gives the float64 output: up front where the ulp statistics
    can measure the output (a floating tensor of a deterministic op), else only when the plain
    check fails. `sequence` (a DeviceSequence) is asked for only when the rule fails the
    device against the CPU's kernel (rule 6). Outputs equal to
    the CPU's bit for bit are measured once, in `item_numerics`."""
    if setup.meta_only or tally.kind == "undefined":
        result = chk.check_metadata(dev, ref)
        if result.ok and placement and not setup.meta_only:
            result = Comparison(False, "structure", placement)
    else:
        dev, ref = smp.plain_sizes(dev), smp.plain_sizes(ref)
        wants_oracle = oracle is not None and tally.kind == "deterministic"
        if chk.identical(dev, ref):
            result = Comparison(True, "exact", "", 0.0, 0.0)  # the common case on a good backend, cheaply
            # Measured only until the item has enough bit-identical elements (and only then is
            # `measurable` asked: `measured` matters below only for a failing result).
            measured = wants_oracle and tally.identical_elements < IDENTICAL_ELEMENTS_MEASURED and ulp.measurable(ref)
            hi = oracle() if measured else None
            if hi is not None:
                leaves = ulp.oracle_leaves(ref, hi)
                tally.identical_leaves += leaves
                tally.identical_elements += sum(leaf[0].numel() for leaf in leaves)
        else:
            measured = wants_oracle and ulp.measurable(ref)
            hi = oracle() if measured else None
            # With an expected rounding the lean is judged over the item only (`item_numerics`).
            result = compare(dev, ref, hi, rtol=setup.rtol, atol=setup.atol, bias_rule=setup.expect_rounding is None)
        if not result.ok and not measured and oracle is not None and result.rule != "structure":
            hi = oracle()
            result = compare(dev, ref, hi, rtol=setup.rtol, atol=setup.atol)
        if hi is not None and sequence is not None and tally.kind == "deterministic":
            if not result.ok and result.rule == "oracle":
                result = composite.against_composite(setup, dev, ref, hi, sequence, result)
            elif (result.ok or result.rule == "bias") and result.numerics is not None and result.numerics.leans():
                result = composite.lean_against_composite(setup, dev, ref, hi, sequence, result)
        if not result.ok and (tally.kind == "random" or cpu_is_random(setup, tally, index, ref)):
            tally.checks.add("random-range")
            result = chk.check_random_range(dev, ref)
            if not result.ok and not setup.backward:  # one CPU draw says little of a small output's range
                result = chk.check_random_range(dev, ref, cpu_draws(setup, tally, index))
            if result.ok and placement:
                result = Comparison(False, "structure", placement)
    tally.total = result if tally.total is None else tally.total.merge(result)
    return result


def item_numerics(setup: ItemSetup, tally: ItemTally) -> Comparison | None:
    """`tally.total` with the statistics of the bit-identical samples folded in, and judged over
    all samples together (rule 5): a lean too small to see in one sample shows in all. A
    passing total whose statistics lean (or round otherwise than `expect_rounding`) comes back
    failing, rule "bias"; conformance/outcome.py makes that a MISMATCH."""
    total = tally.total
    if total is None:
        return None
    if tally.identical_leaves:
        # A new total, not an update of this one: it may be a sample's own comparison (merge
        # keeps the total as it is when a sample adds nothing to it).
        numerics = ulp.merge_numerics(total.numerics, ulp.numerics_of_leaves(tally.identical_leaves))
        tally.total = total = dataclasses.replace(total, numerics=numerics)
        tally.identical_leaves = []
    if total.ok and total.numerics is not None:
        reason = total.numerics.verdict(setup.expect_rounding)
        if reason:
            total = dataclasses.replace(total, ok=False, rule="bias", reason=reason)
    return total


def cpu_is_random(setup: ItemSetup, tally: ItemTally, index: int, ref: Any) -> bool:
    """Does the CPU itself give other values under another seed? (ops not known to be random)"""
    if tally.kind != "deterministic" or setup.backward or tally.probed:
        return False
    tally.probed = True  # once per item: it regenerates the samples
    try:
        with torch.random.fork_rng(devices=[]):
            sample = make_samples(setup)[index]
            torch.default_generator.manual_seed(setup.seed + RANDOMNESS_PROBE_SEED_OFFSET)
            # Compiled random ops draw unseeded (compiled.unseeded_random_ops): so must the probe.
            with _random_ops_as_compiled(setup):
                again = call(setup, tally, setup.op, sample)
    except Exception:
        return False
    if compare(again, ref).ok:
        return False
    tally.kind = "random"
    return True


CPU_DRAWS = 16


def cpu_draws(setup: ItemSetup, tally: ItemTally, index: int, count: int = CPU_DRAWS) -> list[Any]:
    """The sample's CPU output under `count` other seeds: with the reference, the range a
    correct backend's own draw falls in (a few dropout survivors scaled by 1/(1-p) spread
    widely from draw to draw). [] when the sample cannot be made or run again."""
    draws = []
    try:
        with torch.random.fork_rng(devices=[]):
            sample = make_samples(setup)[index]
            for k in range(count):
                torch.default_generator.manual_seed(setup.seed + RANDOMNESS_PROBE_SEED_OFFSET + 1 + k)
                with _random_ops_as_compiled(setup):
                    draws.append(call(setup, tally, setup.op, sample))
    except Exception:
        return []
    return draws


def _random_ops_as_compiled(setup: ItemSetup) -> Any:
    if not setup.compiled:
        return _NOTHING
    from conformance.opinfo.compiled import unseeded_random_ops

    return unseeded_random_ops()


def run_sample(setup: ItemSetup, tally: ItemTally, index: int, sample: Any) -> DeviceRun | ReferenceFailed | str:
    """One sample through every step: NO_GRAD, ReferenceFailed, or the DeviceRun (with its
    `error`, or its `comparison`)."""
    # The device copy first: the CPU reference may update the sample in place.
    tensors: list[torch.Tensor] = []  # the sample's own tensors, found by the copy's walk
    try:
        dev_sample, move_error = smp.to_device(sample, setup.device, adapter=setup.adapter, originals=tensors), None
        # Compile mode: an untouched copy for eager on the device, the second reference.
        eager_sample = smp.to_device(sample, setup.device, adapter=setup.adapter) if setup.compiled else None
    except Exception as exc:  # the device cannot even hold the inputs (a layout, a dtype)
        dev_sample, eager_sample, move_error = None, None, exc
        tensors = smp.sample_tensors(sample)  # the walk stopped part way
    versions = smp.tensor_versions(tensors)
    with setup.harness_time.measure():
        try:
            reference = run_reference(setup, tally, sample)
        except Exception as exc:
            reference = composite.reference_from_oracle(setup, tally, sample, exc)
            if reference is None:
                return ReferenceFailed(shorten(f"CPU reference failed: {describe_exception(exc)}"))
    if reference == NO_GRAD:
        return NO_GRAD
    untouched = smp.tensor_versions(tensors) == versions
    if move_error is not None:
        return DeviceRun(error=move_error)
    if reference.cpu_missing:
        tally.cpu_missing = composite.cpu_missing_note(setup, reference)
    run = run_on_device(setup, tally, dev_sample, reference.cotangents)
    if run.error is not None:
        retry = retry_with_cpu_arguments(setup, run.error, index, sample, untouched)
        if retry is None:
            return run
        run = run_on_device(setup, tally, retry, reference.cotangents)
        if run.error is not None:
            return run
    oracle = None
    if reference.oracle is not None:
        oracle = lambda: reference.oracle  # noqa: E731
    elif setup.oracle_dtype is not None:
        oracle = lambda: oracle_output(setup, tally, sample, untouched, reference.cotangents)  # noqa: E731
    sequence = None
    if run.replay is not None:
        sequence = composite.DeviceSequence(run.replay, lambda: composite.rerun_with_snapshots(setup, dev_sample, reference.cotangents))
    with setup.harness_time.measure():
        run.comparison = compare_sample(setup, tally, index, run.output, reference.output, run.placement, oracle, sequence)
    if setup.compiled and not setup.meta_only:
        from conformance.opinfo.compiled import check_against_eager

        eager = None if eager_sample is None else (lambda: run_eagerly(setup, tally, eager_sample, reference.cotangents))
        check_against_eager(setup, tally, run, reference, eager)
    return run
