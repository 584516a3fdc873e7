"""The Transformers model suite: run one ("model", model_type, variant, dtype, mode) item.

The model is built once on CPU in float32 under a fixed seed; deep copies
give the CPU reference in the item's dtype, the float64 oracle (the same
random weights), and the device model (`.to(device, dtype)`). Variants:

* forward  - logits compared by the numerics rule;
* backward - loss.backward(), every parameter gradient compared by name; the
             worst one is reported;
* generate - greedy decoding of passes.NEW_TOKENS tokens, exact match with the CPU
             model in the same dtype; the first differing position is reported.

Random work inside the model is reseeded identically before every run and
drawn on the CPU (see randomness.py). On MISMATCH the forward is rerun under
hooks to name the first divergent module (first_divergence.py).

A type that cannot be built tiny is REF_ERROR with "build failed: ...": the
CPU reference cannot be made, which says nothing about the backend.

Suite options (RunConfig.suite_options, a ModelOptions): `attn` ("eager", "sdpa" or
"flex_attention"), `divergence`. With flex_attention the model is built eager and only
its device copies attend through flex (`_DeviceRun.fresh_model`): every CPU run (the reference,
the oracle, the input and label probes) attends eagerly, so flex is what the device is asked to
provide, never a second reference. Where the model's own flex path fails on the CPU, or computes
another function than its eager path there, the item is REF_ERROR (flex_paths.py).
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable
from typing import Any

from conformance.flex.refusal import FORWARD_OP as FLEX_OP, refusal as flex_refusal
from conformance.models import flex_paths
# Under the runner's own names: its tests replace _oracle_copy here to break the oracle.
from conformance.models.cpu_runs import RefFailure as _RefFailure
from conformance.models.cpu_runs import copy_model as _copy
from conformance.models.cpu_runs import on_cpu as _on_cpu
from conformance.models.cpu_runs import oracle_copy as _oracle_copy
from conformance.models.judges import _JUDGES
from conformance.models.passes import _VARIANTS, NothingToDifferentiate, run_forward, run_generate
from conformance.models.plan import SUITE, ModelOptions
from conformance.outcome import Missing, NotApplicable, ReferenceFailed, result_for
from op_db.records import Result, WorkItem, shorten


def preload() -> None:
    """Transformers' import (its modeling utilities pull in torchao and SciPy through the
    quantizers: seconds of CPU), done once in the server workers fork from."""
    import transformers.modeling_utils  # noqa: F401


def prepare(ctx) -> None:
    """Import Transformers once per worker and keep its warnings quiet."""
    import transformers

    transformers.logging.set_verbosity_error()
    from conformance.models import zoo
    from conformance.models.diffusers.zoo import quiet

    quiet()
    ctx.state[SUITE] = {"catalogue": zoo.catalogue()}


def run_item(item: WorkItem, ctx) -> Result:
    import torch

    from conformance.models.diffusers.zoo import is_diffusers

    options = ctx.config.options_of(ModelOptions)
    if not ctx.adapter.dtype_supported(item.dtype):
        return result_for(item, Missing(f"the {ctx.adapter.name} backend does not support {item.dtype}."))
    seed = ctx.config.seed
    harness = ctx.harness_time.measure  # building, the CPU reference and the oracle: not the device's time
    with harness():
        made = _diffusers_item(item, seed) if is_diffusers(item.subject) else _transformers_item(item, options, seed)
    if isinstance(made, Result):
        return made
    base, inputs, run, extra = made
    dtype = getattr(torch, item.dtype)
    with harness():
        ref_model = None
        try:
            ref_model = _copy(base, "cpu", dtype)
            ref_out = _on_cpu(run, ref_model, inputs, dtype, seed)
        except _RefFailure as exc:
            if isinstance(exc.__cause__, NothingToDifferentiate):
                return result_for(item, NotApplicable(str(exc.__cause__)), extra={**extra, "stage": "reference"})
            from conformance.models.ref_failure import explain, first_sample
            from conformance.models.stray_state import model_bug

            # State .to() cannot reach is named where it is the cause; otherwise a second CPU run
            # confirms what the failure means (ref_failure.py).
            stray = model_bug(ref_model, "cpu", dtype, exc.__cause__)
            message = f"CPU reference failed: {stray}" if stray else explain(
                str(exc), dtype,
                lambda: _on_cpu(run, _copy(base, "cpu", torch.float32), inputs, torch.float32, seed),
                lambda: _on_cpu(run, _copy(base, "cpu", dtype), first_sample(inputs), dtype, seed))
            return result_for(item, ReferenceFailed(message), extra={**extra, "stage": "reference"})
        hi_model = hi_out = None
        if item.variant != "generate" and dtype != torch.float64:
            try:
                hi_model = _oracle_copy(base)
                hi_out = _on_cpu(run, hi_model, inputs, torch.float64, seed)
            except _RefFailure as exc:  # a 16-bit item tries float32; else allclose against the CPU alone
                hi_model, hi_out = None, _narrower_oracle(run, base, inputs, dtype, seed, ref_out)
                extra["oracle"] = shorten(f"float64 oracle unavailable: {exc}; "
                                          f"{'float32 oracle used' if hi_out is not None else 'none used'}", 300)
            if hi_out is not None and (broken := _nan_where_finite(hi_out, ref_out)) is not None:
                hi_model, hi_out = None, _narrower_oracle(run, base, inputs, dtype, seed, ref_out)
                extra["oracle"] = shorten(f"float64 oracle unusable: NaN at {broken}, where the CPU's result is "
                                          f"finite; {'float32 oracle used' if hi_out is not None else 'none used'}", 300)
    device_run = _DeviceRun(ctx, item, run, base, inputs, dtype, seed, forward=_forward_of(item, run),
                            attn=extra.get("attn"))
    failure = device_run.execute()
    if failure is not None and device_run.attn == "flex_attention" \
            and (refused := flex_refusal(failure, ctx.device_type)) is not None:
        return result_for(item, refused, samples=1, failing_op=FLEX_OP, extra=extra)
    if failure is not None and device_run.attn == "flex_attention" \
            and (bug := flex_paths.fails_on_cpu(ctx, base, inputs, dtype, seed)) is not None:
        return result_for(item, ReferenceFailed(bug), extra={**extra, "stage": "flex on the CPU"})
    if failure is not None and (bug := device_run.model_bug(failure)) is not None:
        return result_for(item, ReferenceFailed(bug), extra={**extra, "stage": "device placement"})
    fields = {"aten_ops": dict(device_run.ops), "fallback_ops": sorted(device_run.fallbacks), "extra": extra,
              "check": "exact" if item.variant == "generate" else "numerics"}
    if device_run.random_ops:
        extra["random_ops_on_cpu"] = device_run.random_ops
    if device_run.watch is not None:
        fields["compile"], observed_failure = device_run.compile_facts(failure)
        fields["aten_ops"] = {op: 1 for op in fields["compile"]["graph_ops"]}
        if failure is not None:
            from conformance.compiling.failures import describe_failure

            return result_for(item, observed_failure, samples=1, failing_op=device_run.failing_op,
                              message=shorten(f"{fields['compile']['phase']}: {describe_failure(failure)}"), **fields)
    if failure is not None:
        return result_for(item, failure, samples=1, failing_op=device_run.failing_op, **fields)
    comparison = _JUDGES[item.variant](device_run.output, ref_out, hi_out)
    if not comparison.ok and device_run.attn == "flex_attention":
        with harness():  # before rule 6, whose replay of the device's own flex ops would agree with it
            differs = flex_paths.disagreement(ctx, base, inputs, dtype, seed)
        if differs is not None:
            extra["stage"] = "flex on the CPU"
            return result_for(item, ReferenceFailed(differs), **fields)
    if not comparison.ok and item.variant in ("forward", "backward"):
        from conformance.models.composite import against_composite

        with harness():
            comparison = against_composite(device_run, ref_out, hi_out, comparison, _JUDGES[item.variant])
    device_run.calls = device_run.device_output = None  # the references held every intermediate tensor
    result = result_for(item, comparison, fallback=bool(device_run.fallbacks), samples=comparison.samples,
                        samples_passed=comparison.samples_passed, max_abs_err=comparison.max_abs_err,
                        max_rel_err=comparison.max_rel_err, err_ratio=comparison.err_ratio,
                        first_failure=comparison.where or None if not comparison.ok else None, **fields)
    if not comparison.ok and options.divergence:
        _add_divergence(result, device_run, ref_model, hi_model, inputs, dtype, seed)
    return result


def _transformers_item(item: WorkItem, options: ModelOptions, seed: int):
    """(tiny model, inputs, variant function, extra) of a Transformers item, or its Result."""
    from conformance.models import zoo
    from conformance.models.inputs import make_inputs

    entry = zoo.pairs().get(item.subject)
    if entry is None:
        return result_for(item, NotApplicable(f"unknown model type {item.subject!r}"))
    if item.variant == "generate" and entry.task not in zoo.GENERATIVE_TASKS:
        return result_for(item, NotApplicable(f"{entry.task} models do not generate"))
    if not zoo.class_exists(entry):  # Transformers' auto mapping names a class it does not define
        return result_for(item, NotApplicable(zoo.missing_class_reason(entry)), extra={"task": entry.task})
    if (refusal := zoo.attn_refusal(entry, options.attn)) is not None:
        return result_for(item, NotApplicable(refusal), extra={"task": entry.task, "attn": options.attn})
    try:
        # Built eager for flex: only the device's copies attend through it (_DeviceRun.fresh_model).
        base = zoo.build_model(entry, attn="eager" if options.attn == "flex_attention" else options.attn, seed=seed)
    except zoo.BuildError as exc:
        return result_for(item, ReferenceFailed(f"build failed: {exc}"), extra={"task": entry.task, "stage": "build"})
    if options.attn == "flex_attention" and (refusal := _flex_refusal(base)) is not None:
        return result_for(item, NotApplicable(refusal), extra={"task": entry.task, "attn": options.attn})
    from conformance.models.documented import GenerateOnly

    try:
        # Inputs are found by trying layouts on the model (patches.accepted), and a forward may cache
        # state in plain attributes (Mimi's codebooks cache `_embed`) that `.to()` does not move; so the
        # trials run on a throwaway copy, and every copy made of `base` is as fresh as a user's model.
        inputs = make_inputs(entry.task, base.config, seed, labels=item.variant == "backward",
                             model=copy.deepcopy(base))
    except GenerateOnly as exc:
        return result_for(item, NotApplicable(str(exc)), extra={"task": entry.task, "stage": "inputs"})
    except Exception as exc:  # noqa: BLE001 - no inputs, no CPU reference (the census names the cause)
        return result_for(item, ReferenceFailed(f"inputs failed: {type(exc).__name__}: {exc}"),
                          extra={"task": entry.task, "stage": "inputs"})
    return base, inputs, _VARIANTS[item.variant], {"task": entry.task, "class": entry.class_name, "attn": options.attn}


def _flex_refusal(base) -> str | None:
    """Transformers' reason where a class that supports flex has a part that does not (a vision
    tower, a text model): asked of the config, which is set back to eager either way."""
    try:
        base.set_attn_implementation("flex_attention")
    except ValueError as exc:
        return f"Transformers refuses attn_implementation='flex_attention': {shorten(str(exc), 300)}"
    finally:
        base.set_attn_implementation("eager")
    return None


def _diffusers_item(item: WorkItem, seed: int):
    """(tiny model, inputs, variant function, extra) of a Diffusers item, or its Result."""
    from conformance.models.diffusers import forward, zoo
    from conformance.models.diffusers.item import make_inputs

    entry = zoo.entry_of(item.subject)
    if entry is None:
        return result_for(item, NotApplicable(f"unknown Diffusers model class {item.subject!r}"))
    extra: dict[str, Any] = {"library": "diffusers", "family": entry.family, "class": entry.class_name}
    if item.variant == "step":
        from conformance.models.diffusers import pipeline_step

        return pipeline_step.prepare(item, entry, seed, extra)
    if item.variant not in ("forward", "backward"):
        return result_for(item, NotApplicable(f"Diffusers models have no {item.variant} variant"))
    try:
        base = zoo.build_model(entry, seed=seed)
    except zoo.BuildError as exc:
        return result_for(item, ReferenceFailed(f"build failed: {exc}"), extra={**extra, "stage": "build"})
    try:
        inputs = make_inputs(base, entry, seed)
    except Exception as exc:  # noqa: BLE001 - no inputs, no CPU reference (the census names the cause)
        return result_for(item, ReferenceFailed(f"inputs failed: {type(exc).__name__}: {exc}"),
                          extra={**extra, "stage": "inputs"})
    from conformance.models.diffusers.flex_reference import with_dense_flex

    # flex attention on the CPU runs as explicit math: PyTorch has no flex backward there
    run = with_dense_flex(forward.run_backward if item.variant == "backward" else forward.run_forward)
    return base, inputs, run, extra


def _forward_of(item: WorkItem, run: Callable) -> Callable:
    """The plain forward the first-divergence rerun hooks (a pipeline step reruns the step)."""
    from conformance.models.diffusers.zoo import is_diffusers

    if item.variant == "step":
        return run
    if is_diffusers(item.subject):
        from conformance.models.diffusers.forward import run_forward as diffusers_forward

        return diffusers_forward
    return run_forward


# -- running one variant ------------------------------------------------------------------------


def _nan_where_finite(hi_out, ref_out) -> str | None:
    """Where the oracle is NaN and the CPU's result finite (a model whose float64 run breaks down,
    e.g. a mask value that is -inf in float64), the name of the first such output, else None."""
    import torch
    from torch.utils import _pytree as pytree

    hi_leaves, _ = pytree.tree_flatten_with_path(hi_out)
    ref_leaves, _ = pytree.tree_flatten_with_path(ref_out)
    if len(hi_leaves) != len(ref_leaves):
        return None
    for (path, hi), (_, ref) in zip(hi_leaves, ref_leaves):
        if (isinstance(hi, torch.Tensor) and isinstance(ref, torch.Tensor) and hi.is_floating_point()
                and hi.shape == ref.shape and bool((hi.isnan() & ref.isfinite()).any())):
            return pytree.keystr(path) or "the output"
    return None


def _narrower_oracle(run, base, inputs, dtype, seed, ref_out):
    """A float32 run as the oracle of a 16-bit item whose float64 oracle broke down (float32 has
    2^16 times bfloat16's precision), or None where it is no wider or breaks down too."""
    import torch

    if dtype.itemsize >= 4:
        return None
    try:
        wide = _on_cpu(run, _copy(base, "cpu", torch.float32), inputs, torch.float32, seed)
    except _RefFailure:
        return None
    return None if _nan_where_finite(wide, ref_out) is not None else wide


# Rule 6 keeps the device's calls, and so every intermediate tensor, alive until the item is
# judged; a model whose outputs sum past this goes without the second reference (Gemma 3n's
# 262k-token embeddings, kept through every op of its backward, reached 11.7 GB).
KEEP_CALLS_BYTES = 1 << 30


class _DeviceRun:
    """Copies the model to the device, runs the variant, records ops, fallbacks and the failing op."""

    def __init__(self, ctx, item: WorkItem, run, base, inputs, dtype, seed, forward: Callable = None,
                 attn: str | None = None):
        self.ctx, self.item, self.run, self.base = ctx, item, run, base
        self.attn = attn  # the device copies' attn_implementation where it is not the base's (flex)
        self.forward = forward or run_forward  # what the first-divergence rerun runs
        self.inputs, self.dtype, self.seed = inputs, dtype, seed
        self.model = None
        self.output = None
        self.ops: dict[str, int] = {}
        self.fallbacks: list[str] = []
        self.failing_op: str | None = None
        self.random_ops: dict[str, int] = {}
        self.watch = None  # compile mode: the item's CompileWatch
        self.second_shape_recompiles: int | None = None  # --dynamic: recompiles at twice the batch
        self.device_output = None  # eager: the output as the device holds it (rule 6 replays toward it)
        self.calls: list = []  # eager: the device's aten calls, kept by reference

    def fresh_model(self, copied):
        """`copied`, a deep copy of `base` made beforehand outside the dispatch modes (see execute),
        cast onto the device, attending through `attn` where one is set."""
        from conformance.models.dtype_plan import cast_model

        model = cast_model(copied, self.ctx.device, self.dtype)
        if self.attn == "flex_attention":
            model.set_attn_implementation(self.attn)
            flex_paths.forget_compiled_flex()  # compiled afresh by the device's compiler
        return model

    def compiler(self):
        """The block in which the model's own torch.compile calls (Transformers' flex) reach the backend's compiler."""
        from conformance.compiling.settings import default_compiler

        return default_compiler(self.ctx.config.compile, self.ctx.compile_backend)

    def device_inputs(self):
        from conformance.models.inputs import cast_inputs

        return cast_inputs(self.inputs, self.ctx.device, self.dtype)

    def execute(self) -> BaseException | None:
        from conformance.models.randomness import RandomOnCpu, reseed
        from conformance.reference.oprecord import OpRecorder

        adapter = self.ctx.adapter
        device_type = self.ctx.device_type
        recorder = None
        randoms = RandomOnCpu(device_type)
        try:
            with adapter.track_fallbacks() as tracker:
                try:
                    # The CPU deep copy is made before the modes: its thousands of CPU clones touch
                    # no device, so the recorder would only pass them through, at Python speed.
                    copied = copy.deepcopy(self.base)
                    # Dynamo does not trace under a dispatch mode: compile mode records no ops and
                    # leaves random ops on the device (models run in eval mode: dropout is off).
                    with randoms if self.item.mode != "compile" else contextlib.nullcontext():
                        if self.item.mode == "compile":
                            self.model = self.fresh_model(copied)
                            reseed(self.seed, adapter)
                            self.output = _to_cpu(self._run_compiled())
                        else:
                            # The calls are kept (by reference) for rule 6: the device's own op
                            # sequence replayed on the CPU is the second reference of a MISMATCH.
                            with OpRecorder(device_type, keep_calls="references", keep_bytes=KEEP_CALLS_BYTES) as recorder, \
                                    self.compiler():
                                self.model = self.fresh_model(copied)
                                reseed(self.seed, adapter)
                                self.device_output = self.run(self.model, self.device_inputs())
                                self.output = _to_cpu(self.device_output)
                        adapter.synchronize()
                finally:
                    self.random_ops = randoms.ops
                    if recorder is not None:
                        self.ops = dict(recorder.ops)
                        self.failing_op = recorder.failing_op
                        self.calls = recorder.calls
            self.fallbacks = sorted(tracker.ops)
        except Exception as exc:  # noqa: BLE001 - the device's failure is the result
            return exc
        return None

    def model_bug(self, failure: BaseException) -> str | None:
        """Why `failure` is the model's own bug (stray_state.py), or None where the backend may be at fault."""
        from conformance.models.stray_state import model_bug

        return model_bug(self.model, self.ctx.device_type, self.dtype, failure)

    def snapshot_calls(self) -> list:
        """The item once more on the device, each aten call's inputs and outputs kept as CPU
        copies (rule 6 judges each primitive alone); [] when the run raises this time or the
        copies outgrow KEEP_CALLS_BYTES (then no primitive can vouch for the sequence)."""
        from conformance.models.randomness import RandomOnCpu, reseed
        from conformance.reference.oprecord import OpRecorder

        recorder = OpRecorder(self.ctx.device_type, keep_calls="snapshots", keep_bytes=KEEP_CALLS_BYTES)
        try:
            copied = copy.deepcopy(self.base)  # outside the modes, as in execute
            with RandomOnCpu(self.ctx.device_type), recorder, self.compiler():
                model = self.fresh_model(copied)
                reseed(self.seed, self.ctx.adapter)
                self.run(model, self.device_inputs())
                self.ctx.adapter.synchronize()
        except Exception:  # noqa: BLE001
            return []
        return [] if recorder.calls_dropped else recorder.calls

    def _run_compiled(self):
        from conformance.models import compiled

        self.watch, model = compiled.compile_model(self.model, self.ctx, self.item.variant)
        run = functools.partial(run_generate, static_cache=True) if self.item.variant == "generate" else self.run
        inputs = self.device_inputs()
        dynamic = self.ctx.config.compile.dynamic and self.item.variant == "forward"
        if dynamic:
            compiled.mark_batch_dynamic(inputs)
        with self.watch:
            output = run(model, inputs)
            if dynamic:
                self.second_shape_recompiles = compiled.second_shape_recompiles(self.watch, run, model, inputs)
        return output

    def compile_facts(self, failure: BaseException | None) -> tuple[dict[str, Any], Any]:
        """The item's `compile` record, and what outcome.status_of is given for `failure`."""
        from conformance.compiling.failures import observe_failure

        phase = self.watch.failure_phase(failure) if failure is not None else None
        facts = self.watch.facts(phase=phase).to_dict()
        if self.second_shape_recompiles is not None:
            facts["second_batch_recompiles"] = self.second_shape_recompiles
        return facts, (observe_failure(failure, phase) if failure is not None else None)


def _to_cpu(value):
    import torch
    from torch.utils import _pytree as pytree

    return pytree.tree_map(lambda x: x.detach().to("cpu") if isinstance(x, torch.Tensor) else x, value)


def _add_divergence(result: Result, device_run: _DeviceRun, ref_model, hi_model, inputs, dtype, seed) -> None:
    """Name the first divergent module of a MISMATCH (forward hooks, eager) in the Result."""
    from conformance.models import first_divergence
    from conformance.models.inputs import cast_inputs
    from conformance.models.randomness import RandomOnCpu, reseed

    adapter = device_run.ctx.adapter

    def on_device():
        with RandomOnCpu(device_run.ctx.device_type), device_run.compiler():
            reseed(seed, adapter)
            device_run.forward(device_run.model, device_run.device_inputs())

    def on_cpu(model, run_dtype):
        def go():
            reseed(seed)
            device_run.forward(model, cast_inputs(inputs, "cpu", run_dtype))
        return go

    try:
        found = first_divergence.locate(on_device, device_run.model, on_cpu(ref_model, dtype), ref_model,
                                  on_cpu(hi_model, _float64()) if hi_model is not None else None, hi_model,
                                  device_run.ctx.device_type)
    except Exception as exc:  # noqa: BLE001 - the mismatch stands; say why it was not located
        result.extra["divergence_error"] = shorten(f"{type(exc).__name__}: {exc}", 300)
        return
    if found is None:
        result.extra["divergence"] = None
        return
    result.divergence = found.describe()
    result.extra["divergence"] = found.to_dict()
    result.failing_op = result.failing_op or found.failing_op
    if found.router:
        result.extra["router_flip"] = True
        result.message = shorten(f"MoE routing flipped at {found.describe()} (topk chose different experts); "
                                 f"{result.message}")


def _float64():
    import torch

    return torch.float64
