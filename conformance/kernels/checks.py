"""The registration checks of a kernels item: torch.library.opcheck, one test per item, and the
compile-mode wrapper (torch.compile(fullgraph=True) of a function that calls the op)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from conformance.kernels import sampling as smp
from conformance.kernels.plan import OPCHECKS
from conformance.kernels.target import resolve
from conformance.numerics import Comparison
from conformance.outcome import RegistrationFailed, result_for
from op_db.records import Result, WorkItem

# opcheck's autograd registration test knows these devices' autograd keys and refuses others
# (torch/testing/_internal/optests/autograd_registration.py); `autograd_registration` below
# makes the same check for any device.
OPCHECK_AUTOGRAD_DEVICES = ("cpu", "cuda", "xpu")
# test_aot_dispatch_dynamic compiles the op (and its backward) for each sample, seconds each: it
# runs on the first sample, which shows a broken registration as well as all of them would; the
# fake kernel's agreement on every sample is test_faketensor's.
AOT_SAMPLES = 1


def opcheck_item(item: WorkItem, samples: list[smp.Sample], ctx: Any) -> Result:
    """PASS when opcheck's test passes for every sample on the device; ERROR with opcheck's words
    and the sample's label otherwise."""
    op, test = resolve(item.subject), OPCHECKS[item.variant]
    chosen = samples[:AOT_SAMPLES] if test == "test_aot_dispatch_dynamic" else samples
    for index, sample in enumerate(chosen):
        placed = smp.to_device(sample, ctx.device)
        try:
            if test == "test_autograd_registration" and ctx.device_type not in OPCHECK_AUTOGRAD_DEVICES:
                autograd_registration(op, placed.args, placed.kwargs, ctx.device_type)
            else:
                torch.library.opcheck(op, placed.args, placed.kwargs, test_utils=[test])
        except Exception as exc:  # opcheck raises OpCheckError; the op itself may raise anything
            return result_for(item, RegistrationFailed(_first_line(exc)), samples=len(chosen),
                              samples_passed=index, check=test, failing_op=str(op),
                              first_failure=f"sample {index} ({sample.label})")
        ctx.adapter.synchronize()
    return result_for(item, Comparison(True, "exact"), samples=len(chosen), samples_passed=len(chosen), check=test)


def autograd_registration(op: Any, args: tuple, kwargs: dict, device_type: str) -> None:
    """opcheck's test_autograd_registration for a device it does not know (PrivateUse1 backends):
    the op must have a kernel at Autograd<its backend key>, Autograd or
    CompositeImplicitAutograd, or else no output of a call with the autograd fallback switched
    off may require grad (that would mean an autograd.Function sits at a backend key, where it
    silently gives wrong gradients). AssertionError naming the op otherwise."""
    from torch.utils import _pytree as pytree

    name = op.name()
    backend_key = torch._C._dispatch_key_for_device(device_type)
    for key in (f"Autograd{backend_key}", "Autograd", "CompositeImplicitAutograd"):
        if torch._C._dispatch_has_kernel_for_dispatch_key(name, key):
            return
    inputs = {id(leaf) for leaf in pytree.arg_tree_leaves(*args, **kwargs)}
    previous = torch._C._get_autograd_fallback_mode()
    torch._C._set_autograd_fallback_mode("nothing")
    try:
        outputs = op(*args, **kwargs)
    finally:
        torch._C._set_autograd_fallback_mode(previous)
    if pytree.tree_any_only(torch.Tensor, lambda t: t.requires_grad and id(t) not in inputs, outputs):
        raise AssertionError(f"{name}: an output requires grad but the op has no kernel at an autograd key "
                             f"(Autograd or Autograd{backend_key}): its autograd formula sits at a backend key, "
                             "where it can give silently wrong gradients; register it with "
                             "torch.library.register_autograd.")


def _first_line(exc: BaseException) -> str:
    """opcheck's own sentence (its first lines), not the chained traceback text."""
    text = str(exc).strip() or repr(exc)
    cause = exc.__cause__
    if cause is not None and str(cause).strip():
        text = f"{text.splitlines()[0]} {type(cause).__name__}: {str(cause).strip()}"
    return f"{type(exc).__name__}: {text}"


class CompiledOp:
    """The op inside torch.compile(fullgraph=True): a graph break at the op raises (an ERROR
    naming the break), and with --dynamic a second sample of the same structure (same ranks,
    dtypes, layouts and non-tensor arguments, other sizes) must not recompile."""

    def __init__(self, op: Any, ctx: Any):
        from conformance.compiling.watch import CompileWatch

        settings = dataclasses.replace(ctx.config.compile, fullgraph=True)
        self.watch = CompileWatch(ctx.compile_backend, settings)
        self.dynamic = settings.dynamic
        self.compiled = self.watch.compile(lambda *args, **kwargs: op(*args, **kwargs), dynamic=self.dynamic or None)
        self.seen: dict[tuple, str] = {}
        self.recompiled: list[str] = []
        self._recompiles = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.watch:
            return self.compiled(*args, **kwargs)

    def check_no_recompile(self, sample: smp.Sample) -> None:
        recompiles = self.watch.facts().recompiles
        key = _structure(sample)
        if self.dynamic and key in self.seen and recompiles > self._recompiles:
            self.recompiled.append(f"{sample.label} after {self.seen[key]}")
        self.seen.setdefault(key, sample.label)
        self._recompiles = recompiles
        if self.recompiled:
            raise RecompiledError(f"recompiled under --dynamic for a second shape: {self.recompiled[0]}")

    def observation(self, failure: BaseException) -> Any:
        from conformance.compiling.failures import describe_failure, observe_failure

        phase = self.watch.failure_phase(failure)
        if isinstance(failure, RecompiledError) or phase == "trace":
            # Dynamo could not trace through the op (no fake kernel, a graph break at it): the
            # op's registration is at fault, not the backend compiler.
            return RegistrationFailed(describe_failure(failure))
        return observe_failure(failure, phase)

    def fields(self, failure: BaseException | None) -> dict[str, Any]:
        phase = self.watch.failure_phase(failure) if failure is not None else None
        facts = self.watch.facts(phase=phase)
        return {"compile": facts.to_dict(), "aten_ops": {op: 1 for op in facts.graph_ops}}


def compile_samples(samples: list[smp.Sample], *, dynamic: bool) -> list[smp.Sample]:
    """The samples a compile-mode item runs: the first of each structure (what a new graph is
    compiled for), and with --dynamic the second of each too (which must reuse the graph).
    The kernel's numerics over every sample are the eager items' to judge; each compile costs
    seconds, so compiling for every shape would make a kernel library's sweep take minutes."""
    per_structure = 2 if dynamic else 1
    seen: dict[tuple, int] = {}
    chosen = []
    for sample in samples:
        key = _structure(sample)
        if seen.get(key, 0) < per_structure:
            seen[key] = seen.get(key, 0) + 1
            chosen.append(sample)
    return chosen


class RecompiledError(RuntimeError):
    pass


def _structure(sample: smp.Sample) -> tuple:
    """What must not change for a dynamic-shape graph to serve a sample: everything but sizes."""
    def key(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return ("tensor", value.dim(), value.dtype, value.is_contiguous(), value.requires_grad)
        return ("value", repr(value))

    return tuple(key(a) for a in sample.args) + tuple((k, key(v)) for k, v in sorted(sample.kwargs.items()))
