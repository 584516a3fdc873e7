"""The OpInfo suite: run one PyTorch OpInfo op in one dtype on the device and judge it.

For each sample (made on CPU with a fixed seed): move a copy to the device,
run the op there (recording the aten overloads it hits and any CPU fallback),
run the CPU reference, compare with the numerics rule; a float64 oracle of
the same sample is computed only when the plain tolerance check fails (the
rule needs it only then, and it would otherwise double the CPU work).
The backward variant does the same with the gradients of every input that
requires grad, for one fixed random cotangent per output.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from typing import Any

import torch

from conformance.opinfo import checks as chk
from conformance.config import WorkerContext
from conformance.numerics import Comparison, compare, numerics_of_leaves, oracle_leaves
from conformance.oprecord import record_ops
from conformance.outcome import classify_exception, describe_exception
from op_db.records import Result, Status, WorkItem, shorten

SUITE = "opinfo"
COTANGENT_SEED_OFFSET = 1
RANDOMNESS_PROBE_SEED_OFFSET = 7919


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
    ctx.state[SUITE] = {op.full_name: op for op in op_db}
    if ctx.config.mode == "compile":
        import torch._dynamo as dynamo

        # One compiled function per item sees every sample's shapes; do not fall back to eager.
        for name in ("recompile_limit", "cache_size_limit"):
            if hasattr(dynamo.config, name):
                setattr(dynamo.config, name, 64)


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


def run_item(item: WorkItem, ctx: WorkerContext) -> Result:
    started = time.perf_counter()
    op = ctx.state[SUITE].get(item.subject)
    if op is None:
        return Result.for_item(item, Status.SKIP, message=f"{item.subject} is not an OpInfo op in this torch build.")
    if chk.cuda_only(op):
        return Result.for_item(item, Status.SKIP, message=f"OpInfo marks {item.subject} CUDA-only (onlyCUDA): "
                               "there is no CPU reference to compare with.")
    dtype = getattr(torch, item.dtype)
    run = _ItemRun(item, op, dtype, ctx)
    result = run.execute()
    result.duration_s = time.perf_counter() - started
    return result


class _ItemRun:
    """State of one item while its samples run."""

    def __init__(self, item: WorkItem, op: Any, dtype: torch.dtype, ctx: WorkerContext):
        self.item, self.op, self.dtype, self.ctx = item, op, dtype, ctx
        self.backward = item.variant == "backward"
        self.device_type = ctx.device_type
        self.kind = chk.output_kind(item.subject)
        self.meta_only = self.device_type == "meta"
        self.rtol, self.atol = chk.tolerance_overrides(op, dtype, self.device_type, self.backward)
        self.aten_ops: dict[str, int] = {}
        self.fallbacks: dict[str, int] = {}
        self.op_time = 0.0
        self.total: Comparison | None = None
        self.checks: set[str] = set()
        self.device_fn = self._device_fn()
        self.expect_rounding: str | None = ctx.config.options.get("expect_rounding")
        self.identical_leaves: list = []  # outputs equal to the CPU's bit for bit, with their oracle

    # -- the item --------------------------------------------------------------

    def execute(self) -> Result:
        item, ctx = self.item, self.ctx
        base = dict(claimed=chk.claimed(self.op, self.dtype, self.device_type))
        if not ctx.adapter.dtype_supported(item.dtype):
            return Result.for_item(item, Status.UNSUPPORTED, message=f"the {ctx.device} backend does not support {item.dtype}.", **base)
        try:
            samples = self._samples()
        except Exception as exc:  # sample generation is pure CPU work: the reference failed
            return Result.for_item(item, Status.REF_ERROR, message=shorten(f"making samples: {describe_exception(exc)}"), **base)
        if not samples:
            return Result.for_item(item, Status.SKIP, message=f"OpInfo has no {'differentiable ' if self.backward else ''}samples for {item.dtype}.", **base)
        # Seed CPU and device once per item: the reference and the device run draw the same
        # amounts, so their streams stay in step sample after sample. (Seeding per sample
        # costs milliseconds each: torch.manual_seed queues lazy-init calls for every backend.)
        ctx.adapter.manual_seed(ctx.config.seed)

        ran = passed = ref_errors = 0
        status, first_failure, message, failing_op = None, None, None, None
        for index, sample in enumerate(samples):
            outcome = self._run_sample(index, sample)
            if outcome == "no-grad":
                continue
            ran += 1
            if outcome == "ref-error":
                ref_errors += 1
                continue
            if isinstance(outcome, BaseException):
                status = classify_exception(outcome)
                first_failure = chk.describe_sample(index, sample)
                message = describe_exception(outcome)
                failing_op = self._last_failing_op
                break
            if outcome.ok:
                passed += 1
            elif first_failure is None:
                first_failure = chk.describe_sample(index, sample)
                message, failing_op = outcome.reason, chk.guess_failing_op(self._last_ops)
        if status is None:
            if ran == 0:
                status, message = Status.SKIP, f"OpInfo has no differentiable samples for {item.dtype}."
            elif ref_errors == ran:
                status, message = Status.REF_ERROR, self._ref_message
            elif passed < ran - ref_errors:
                status = Status.MISMATCH
            elif self.fallbacks:
                status = Status.FALLBACK
            else:
                status = Status.PASS
        total = self.total
        if total is not None and self.identical_leaves:
            total.numerics = numerics_of_leaves(self.identical_leaves) if total.numerics is None \
                else total.numerics.merge(numerics_of_leaves(self.identical_leaves))
        if status in (Status.PASS, Status.FALLBACK) and total is not None and total.numerics is not None:
            # Rule 5 over all samples together: a lean too small to see in one sample shows in all.
            reason = total.numerics.verdict(self.expect_rounding)
            if reason:
                status, message = Status.MISMATCH, reason
        extra: dict[str, Any] = {"op_time_s": round(self.op_time, 6)}
        if self.ctx.config.mode == "compile":
            extra["compile_backend"] = self.ctx.compile_backend
        if ref_errors:
            extra["ref_errors"] = ref_errors
        if self.rtol is not None or self.atol is not None:
            extra["tolerance_override"] = {"rtol": self.rtol, "atol": self.atol}
        return Result.for_item(
            item, status, samples=ran, samples_passed=passed,
            max_abs_err=total.max_abs_err if total else None, max_rel_err=total.max_rel_err if total else None,
            err_ratio=total.err_ratio if total else None, first_failure=shorten(first_failure, 400),
            message=shorten(message), failing_op=failing_op, aten_ops=dict(sorted(self.aten_ops.items())),
            fallback_ops=sorted(self.fallbacks), check=self._check_name(), extra=extra,
            numerics=total.numerics.to_dict() if total is not None and total.numerics is not None else {}, **base,
        )

    def _check_name(self) -> str:
        if self.meta_only or self.kind == "undefined":
            return "shape-dtype-device"
        return "random-range" if "random-range" in self.checks else "numerics"

    def _samples(self) -> list[Any]:
        torch.default_generator.manual_seed(self.ctx.config.seed)  # not torch.manual_seed: see _run_sample
        maker = self.op.reference_inputs if self.ctx.config.reference_inputs else self.op.sample_inputs
        samples = maker("cpu", self.dtype, requires_grad=self.backward, set_seed=False)
        limit = self.ctx.config.max_samples
        return list(itertools.islice(samples, limit) if limit else samples)

    def _device_fn(self):
        if self.ctx.config.mode != "compile":
            return self.op
        import torch._dynamo

        torch._dynamo.reset()  # each item compiles afresh: no cache growth across a long run
        op = self.op

        def call(*args, **kwargs):
            return op(*args, **kwargs)

        return torch.compile(call, backend=self.ctx.compile_backend, dynamic=False)

    # -- one sample ------------------------------------------------------------

    _last_failing_op: str | None = None
    _last_ops: dict[str, int] = {}
    _ref_message: str | None = None
    _probed = False

    def _run_sample(self, index: int, sample: Any):
        """'no-grad', 'ref-error', an exception the device raised, or a Comparison."""
        seed = self.ctx.config.seed
        # The device copy first: the CPU reference may update the sample in place.
        try:
            dev_sample, move_error = chk.to_device(sample, self.ctx.device), None
        except Exception as exc:  # the device cannot even hold the inputs (a layout, a dtype)
            dev_sample, move_error = None, exc
        # The oracle's float64 copy is made only if needed, from the untouched sample; an op that
        # updated its input in place (version counters moved) gets no oracle.
        hi_dtype = None if self.meta_only or self.kind == "undefined" else chk.oracle_dtype(self.dtype)
        versions = chk.tensor_versions(sample)
        hi_sample = (sample, versions) if hi_dtype is not None else None
        cotangents: list[torch.Tensor] | None = None
        try:
            ref = self._call(self.op, sample)
            if self.backward:
                outs = chk.differentiable_outputs(ref)
                if not outs or not chk.grad_inputs(sample):
                    return "no-grad"
                gen = torch.Generator().manual_seed(seed + COTANGENT_SEED_OFFSET)
                cotangents = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in outs]
                ref = self._grads(ref, sample, cotangents)
        except Exception as exc:
            self._ref_message = shorten(f"CPU reference failed: {describe_exception(exc)}")
            return "ref-error"
        if move_error is not None:
            self._last_failing_op = None
            return move_error
        try:
            dev, placement = self._device_run(dev_sample, cotangents)
        except Exception as exc:
            retry = self._cpu_argument_retry(exc, index, sample, versions)
            if retry is None:
                return exc
            try:
                dev, placement = self._device_run(retry, cotangents)
            except Exception as again:
                return again
        return self._judge(index, dev, ref, hi_sample, cotangents, placement)

    def _device_run(self, dev_sample: Any, cotangents: list[torch.Tensor] | None) -> tuple[Any, str | None]:
        """The op (and gradients) on the device, recorded; outputs brought back to the CPU."""
        self._last_failing_op = None
        with self._recorder() as recorder, self.ctx.adapter.track_fallbacks() as tracker:
            try:
                dev = self._call(self.device_fn, dev_sample)
                if self.backward:
                    dev = self._grads(dev, dev_sample, cotangents)
                self.ctx.adapter.synchronize()
            finally:
                self._last_ops = dict(recorder.ops)
                for name, count in recorder.ops.items():
                    self.aten_ops[name] = self.aten_ops.get(name, 0) + count
                self._last_failing_op = recorder.failing_op
        for name, count in tracker.ops.items():
            self.fallbacks[name] = self.fallbacks.get(name, 0) + count
        placement = chk.wrong_device(dev, self.device_type)
        return (dev if self.meta_only else chk.to_cpu(dev)), placement

    def _cpu_argument_retry(self, exc: Exception, index: int, sample: Any, versions: list[int]) -> Any | None:
        """Some sample functions keep an argument on the CPU on purpose (tensor_split's indices);
        moving it made the device refuse. Rebuild the device copy with those left on the CPU."""
        if not chk.WANTS_CPU_ARGUMENT.search(str(exc)) or chk.tensor_versions(sample) != versions:
            return None
        try:
            with torch.random.fork_rng(devices=[]):
                maker = self.op.reference_inputs if self.ctx.config.reference_inputs else self.op.sample_inputs
                meta = list(itertools.islice(maker("meta", self.dtype, requires_grad=self.backward, set_seed=False),
                                             index + 1))[index]
            stay = chk.cpu_positions(meta)
        except Exception:
            return None
        return chk.to_device(sample, self.ctx.device, stay) if stay else None

    def _recorder(self):
        """Records aten ops in eager mode. Under torch.compile it records nothing: Dynamo
        declines to compile while a dispatch mode is active, which would test eager instead."""
        if self.ctx.config.mode == "compile":
            return contextlib.nullcontext(_NothingRecorded())
        return record_ops(self.device_type)

    def _call(self, fn, sample: Any) -> Any:
        started = time.perf_counter()
        try:
            return sample.output_process_fn_grad(fn(sample.input, *sample.args, **sample.kwargs))
        finally:
            self.op_time += time.perf_counter() - started

    def _grads(self, out: Any, sample: Any, cotangents: list[torch.Tensor]) -> tuple:
        outs = chk.differentiable_outputs(out)
        if len(outs) != len(cotangents):
            raise RuntimeError(f"{len(outs)} differentiable outputs where the CPU had {len(cotangents)}")
        grads_out = [c.to(device=o.device, dtype=o.dtype) for c, o in zip(cotangents, outs)]
        started = time.perf_counter()
        try:
            return torch.autograd.grad(outs, chk.grad_inputs(sample), grads_out, allow_unused=True)
        finally:
            self.op_time += time.perf_counter() - started

    def _oracle(self, hi_source: tuple[Any, list[int]], cotangents: list[torch.Tensor] | None) -> Any:
        sample, versions = hi_source
        if chk.tensor_versions(sample) != versions:
            return None
        hi_dtype = chk.oracle_dtype(self.dtype)
        hi_sample = chk.to_oracle(sample, self.dtype, hi_dtype)
        try:
            with torch.random.fork_rng(devices=[]):  # keep the CPU stream in step with the device's
                torch.default_generator.manual_seed(self.ctx.config.seed)
                hi = self._call(self.op, hi_sample)
                return self._grads(hi, hi_sample, cotangents) if self.backward else hi
        except Exception:
            return None  # no oracle: the rule falls back to the plain tolerance check

    def _judge(self, index: int, dev: Any, ref: Any, hi_sample: Any, cotangents, placement: str | None) -> Comparison:
        if self.meta_only or self.kind == "undefined":
            result = chk.check_metadata(dev, ref)
            if result.ok and placement and not self.meta_only:
                result = Comparison(False, "structure", placement)
        else:
            # The oracle of every deterministic sample: ulp statistics need it even for a PASS.
            hi = self._oracle(hi_sample, cotangents) if hi_sample is not None and self.kind == "deterministic" else None
            if chk.identical(dev := chk.plain_sizes(dev), ref := chk.plain_sizes(ref)):  # the common case on a good backend, at a fraction of the cost
                result = Comparison(True, "exact", "", 0.0, 0.0)
                if hi is not None:  # measured once per item, at the end: the CPU's statistics
                    self.identical_leaves += oracle_leaves(ref, hi)
            else:
                result = compare(dev, ref, hi, rtol=self.rtol, atol=self.atol, bias_rule=self.expect_rounding is None)
            if not result.ok and hi is None and hi_sample is not None and result.rule != "structure":
                result = compare(dev, ref, self._oracle(hi_sample, cotangents), rtol=self.rtol, atol=self.atol)
            if not result.ok and (self.kind == "random" or self._cpu_is_random(index, ref)):
                self.checks.add("random-range")
                result = chk.check_random_range(dev, ref)
                if result.ok and placement:
                    result = Comparison(False, "structure", placement)
        self.total = result if self.total is None else self.total.merge(result)
        return result

    def _cpu_is_random(self, index: int, ref: Any) -> bool:
        """Does the CPU itself give other values under another seed? (ops not known to be random)"""
        if self.kind != "deterministic" or self.backward or self._probed:
            return False
        self._probed = True  # once per item: it regenerates the samples
        try:
            with torch.random.fork_rng(devices=[]):
                sample = self._samples()[index]
                torch.default_generator.manual_seed(self.ctx.config.seed + RANDOMNESS_PROBE_SEED_OFFSET)
                again = self._call(self.op, sample)
        except Exception:
            return False
        if compare(again, ref).ok:
            return False
        self.kind = "random"
        return True


class _NothingRecorded:
    ops: dict[str, int] = {}
    failing_op: str | None = None
