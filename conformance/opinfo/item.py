"""What one OpInfo item holds while its samples run (conformance/opinfo/steps.py runs them):
the setup fixed per item, the tally the samples add to, a sample's CPU reference and device
run, and the timed calls every step makes (the op, its gradients, a device sync).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

from conformance.engine.harness_time import HarnessTime
from conformance.numerics import Comparison
from conformance.opinfo import samples as smp
from conformance.reference.oprecord import OpRecorder

COTANGENT_SEED_OFFSET = 1
RANDOMNESS_PROBE_SEED_OFFSET = 7919


@dataclasses.dataclass
class ItemSetup:
    """What is fixed for every sample of one item."""

    op: Any  # the OpInfo
    dtype: torch.dtype
    device: str
    device_type: str
    adapter: Any  # conformance.backends.BackendAdapter
    backward: bool
    compiled: bool
    compile_backend: str | None  # compile mode: the torch.compile backend
    seed: int
    reference_inputs: bool
    max_samples: int | None
    rtol: float | None
    atol: float | None
    meta_only: bool
    oracle_dtype: torch.dtype | None  # None: the item's outputs get no float64 oracle
    device_fn: Any  # the op, or its torch.compile'd wrapper
    watch: Any = None  # compile mode: the item's conformance.compiling.watch.CompileWatch
    # Eager mode: the one aten-op recorder of the item, entered around each sample's device run
    # (reset each time); None in compile mode, where nothing is recorded.
    recorder: OpRecorder | None = None
    expect_rounding: str | None = None  # OpsOptions.expect_rounding: judged over the whole item
    # The worker's clock of harness work (the CPU reference, the oracle, the comparisons), which
    # the item's time limit does not count.
    harness_time: HarnessTime = dataclasses.field(default_factory=HarnessTime)


@dataclasses.dataclass
class ItemTally:
    """What the samples of one item add up to."""

    kind: str  # "deterministic", "random" (may be found out on the way) or "undefined"
    aten_ops: Counter = dataclasses.field(default_factory=Counter)
    fallbacks: Counter = dataclasses.field(default_factory=Counter)
    op_time: float = 0.0
    total: Comparison | None = None
    checks: set[str] = dataclasses.field(default_factory=set)
    probed: bool = False  # the CPU-randomness probe runs at most once per item
    vs_eager: Comparison | None = None  # compile mode: compiled outputs against eager on the device
    eager_failed: int = 0  # compile mode: samples whose eager run on the device raised
    eager_agrees_with_cpu: bool | None = None  # compile mode, the first mismatching sample: eager's verdict
    identical_leaves: list = dataclasses.field(default_factory=list)  # bit-identical outputs with their oracle
    identical_elements: int = 0  # elements measured in bit-identical outputs so far
    cpu_missing: str | None = None  # the CPU has no kernel in the dtype: the note saying so (rule 6)


@dataclasses.dataclass
class Reference:
    output: Any
    cotangents: list[torch.Tensor] | None  # backward: the fixed random cotangent per output
    # The CPU has no kernel in the item's dtype: `output` is the float64 oracle (`oracle`)
    # rounded into the dtype, and `cpu_missing` says what the CPU raised (rule 6).
    oracle: Any = None
    cpu_missing: str | None = None


@dataclasses.dataclass
class DeviceRun:
    output: Any = None  # on the CPU (meta: as the device left it)
    placement: str | None = None  # why an output is not on the device, if one is not
    error: BaseException | None = None
    ops: dict[str, int] = dataclasses.field(default_factory=dict)  # this sample's aten ops
    failing_op: str | None = None
    comparison: Comparison | None = None  # set once the output is judged
    # Eager mode: the device's recorded op sequence run again on the CPU (conformance/reference/replay.py),
    # on demand; None where nothing was recorded.
    replay: Callable[[], Any] | None = None


_NOTHING = contextlib.nullcontext()  # reentrant: stands in for the watch or recorder an item lacks
# Bit-identical samples measure the CPU's rounding on both sides, so they cannot make the bias
# rule fire; past this many of their elements per item the oracle is not worth its cost.
IDENTICAL_ELEMENTS_MEASURED = 256
NO_GRAD = "no-grad"  # a backward sample with nothing differentiable: not counted


def call(setup: ItemSetup, tally: ItemTally, fn: Any, sample: Any) -> Any:
    """`fn` on the sample, timed into the item's op time."""
    started = time.perf_counter()
    try:
        return sample.output_process_fn_grad(fn(sample.input, *sample.args, **sample.kwargs))
    finally:
        tally.op_time += time.perf_counter() - started


def grads(tally: ItemTally, out: Any, sample: Any, cotangents: list[torch.Tensor]) -> tuple:
    """Gradients of the sample's differentiable inputs for the fixed cotangents, timed."""
    outs = smp.differentiable_outputs(out)
    if len(outs) != len(cotangents):
        raise RuntimeError(f"{len(outs)} differentiable outputs where the CPU had {len(cotangents)}")
    grads_out = [c.to(device=o.device, dtype=o.dtype) for c, o in zip(cotangents, outs)]
    started = time.perf_counter()
    try:
        return torch.autograd.grad(outs, smp.grad_inputs(sample), grads_out, allow_unused=True)
    finally:
        tally.op_time += time.perf_counter() - started


def synchronize(setup: ItemSetup, tally: ItemTally) -> None:
    """Wait for the device, timed into the item's op time: on an asynchronous backend the
    calls above only queue kernels, and their run time is spent here."""
    started = time.perf_counter()
    try:
        setup.adapter.synchronize()
    finally:
        tally.op_time += time.perf_counter() - started
