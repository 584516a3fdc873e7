"""What the OpInfo suite needs besides the numerics rule: moving samples between
devices, the op's own tolerance overrides and dtype claims, the checks for ops
whose output values are undefined or random, and short sample descriptions.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.numerics import Comparison

# Ops whose output values are undefined (uninitialised memory): only metadata can be checked.
UNDEFINED_OPS = re.compile(r"^(empty|empty_like|empty_strided|empty_permuted|new_empty|new_empty_strided|resize_|resize_as_)$")
# Ops that draw random numbers: a backend's stream differs from the CPU's, so when the
# values do not match the CPU's the output is judged by metadata and a sane value range.
RANDOM_OPS = re.compile(
    r"^(bernoulli|multinomial|normal|normal\..*|uniform|cauchy|exponential|geometric|log_normal"
    r"|rand\w*|nn\.functional\.(\w*dropout\w*|rrelu|fractional_max_pool\dd))$"
)
# Tests whose tolerance overrides speak about comparing an op's values between devices or
# against a reference; overrides for other tests (jit, gradcheck, ...) do not apply.
FORWARD_TESTS = frozenset({
    "test_compare_cpu", "test_reference_testing", "test_variant_consistency_eager",
    "test_noncontiguous_samples", "test_python_ref", "test_python_ref_torch_fallback",
    "test_numpy_ref", "test_out",
})
BACKWARD_TESTS = FORWARD_TESTS | {"test_fn_grad", "test_vjp", "test_backward"}
# Ops that move or alias data: never the "op that produced a wrong value".
_PLUMBING = re.compile(r"^aten\.(_to_copy|copy_|detach|clone|lift_fresh|alias|view|_unsafe_view|empty\w*|t|expand)\.")


def output_kind(full_name: str) -> str:
    """'undefined', 'random' or 'deterministic', from the OpInfo full name."""
    if UNDEFINED_OPS.match(full_name):
        return "undefined"
    if RANDOM_OPS.match(full_name):
        return "random"
    return "deterministic"


# -- moving samples ---------------------------------------------------------------


def _is_cpu_device(value: Any) -> bool:
    return (isinstance(value, torch.device) and value.type == "cpu") or value == "cpu"


def transform_sample(sample: Any, tensor_fn, dtype_map: dict[torch.dtype, torch.dtype] | None = None,
                     device: str | None = None):
    """A new SampleInput with `tensor_fn` applied to every tensor, dtypes remapped and
    `device=` arguments of factory ops pointed at `device`."""
    def leaf(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return tensor_fn(value)
        if dtype_map and isinstance(value, torch.dtype):
            return dtype_map.get(value, value)
        if device is not None and isinstance(value, torch.device) and value.type == "cpu":
            return torch.device(device)
        return value

    def tree(value: Any) -> Any:
        if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
            mapped = [tree(v) for v in value]
            return type(value)(mapped) if not hasattr(value, "_fields") else type(value)(*mapped)
        if isinstance(value, dict):
            return {k: tree(v) for k, v in value.items()}
        return leaf(value)

    kwargs = tree(sample.kwargs)
    if device is not None and _is_cpu_device(kwargs.get("device")):
        kwargs["device"] = device
    return type(sample)(tree(sample.input), args=tree(sample.args), kwargs=kwargs,
                        output_process_fn_grad=sample.output_process_fn_grad,
                        broadcasts_input=sample.broadcasts_input, name=sample.name)


def to_device(sample: Any, device: str, stay_on_cpu: frozenset[int] = frozenset()):
    """A copy of the sample on `device` (a copy even for cpu, so in-place ops cannot reach the
    reference's inputs); tensors that require grad become new leaves there. Tensors whose
    position (in traversal order) is in `stay_on_cpu` stay on the CPU (see `cpu_positions`)."""
    position = iter(range(1 << 30))

    def move(t: torch.Tensor) -> torch.Tensor:
        target = "cpu" if next(position) in stay_on_cpu else device
        if not t.requires_grad:
            return _copy_with_base(t, target)
        return t.detach().to(target, copy=True).requires_grad_(True)
    return transform_sample(sample, move, device=device)


def _copy_with_base(t: torch.Tensor, target: str) -> torch.Tensor:
    """Copy `t`; a view of a larger contiguous base carries the whole base, so ops that read
    storage outside the view (as_strided.partial_views) see the same memory as on the CPU."""
    base = t._base
    if base is None or not base.is_contiguous() or t.layout != torch.strided:
        return t.to(target, copy=True)
    moved = base.to(target, copy=True)
    return moved.as_strided(t.size(), t.stride(), t.storage_offset() - base.storage_offset())


def cpu_positions(meta_sample: Any) -> frozenset[int]:
    """Positions of the tensors a sample function left on the CPU when asked for another device
    (tensor_split's index tensors, say), read from the same sample made for device 'meta'."""
    found: list[int] = []
    position = iter(range(1 << 30))

    def note(t: torch.Tensor) -> torch.Tensor:
        index = next(position)
        if t.device.type == "cpu":
            found.append(index)
        return t
    transform_sample(meta_sample, note)
    return frozenset(found)


# Device errors that mean "this argument should have stayed on the CPU".
WANTS_CPU_ARGUMENT = re.compile(r"to be on cpu|expected .{0,40}cpu|must be on cpu|cpu tensor", re.IGNORECASE)


def cuda_only(op: Any) -> bool:
    """True for OpInfos decorated with onlyCUDA (the jiterator entries): their reference
    implementation cannot run on the CPU at all."""
    return any(getattr(d, "__name__", None) == "onlyCUDA" for d in op.decorators)


def oracle_dtype(dtype: torch.dtype) -> torch.dtype | None:
    """float64 (complex128) for low-precision floating dtypes; None when no oracle helps."""
    if dtype.is_complex:
        return torch.complex128 if dtype != torch.complex128 else None
    if dtype.is_floating_point and dtype != torch.float64:
        return torch.float64
    return None


def to_oracle(sample: Any, dtype: torch.dtype, hi: torch.dtype):
    """The same sample in float64: floating tensors of the item's dtype and dtype arguments."""
    def widen(t: torch.Tensor) -> torch.Tensor:
        widened = t.detach().to(hi) if t.dtype == dtype else t.detach().clone()
        return widened.requires_grad_(t.requires_grad) if t.requires_grad else widened
    return transform_sample(sample, widen, {dtype: hi})


def plain_sizes(value: Any) -> Any:
    """torch.Size as a plain tuple: under a dispatch mode some ops return one for the other."""
    return tuple(value) if isinstance(value, torch.Size) else value


def tensor_versions(sample: Any) -> list[int]:
    """In-place update counters of the sample's tensors: they move when an op writes its input."""
    leaves = pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
    return [t._version for t in leaves if isinstance(t, torch.Tensor)]


def identical(dev: Any, ref: Any) -> bool:
    """Bitwise-equal outputs (same structure, dtypes, shapes, values; NaN makes it False)."""
    try:
        return _identical(dev, ref)
    except Exception:  # e.g. torch.equal has no kernel for complex32: let the rule decide
        return False


def _identical(dev: Any, ref: Any) -> bool:
    dev_leaves, dev_spec = pytree.tree_flatten(dev)
    ref_leaves, ref_spec = pytree.tree_flatten(ref)
    if dev_spec != ref_spec:
        return False
    for d, r in zip(dev_leaves, ref_leaves):
        if isinstance(r, torch.Tensor):
            if not (isinstance(d, torch.Tensor) and d.dtype == r.dtype and d.shape == r.shape
                    and d.layout == r.layout == torch.strided and torch.equal(d, r)):
                return False
        elif type(d) is not type(r) or d != r:
            return False
    return True


def to_cpu(value: Any) -> Any:
    return pytree.tree_map(lambda t: t.detach().to("cpu") if isinstance(t, torch.Tensor) else t, value)


def grad_inputs(sample: Any) -> list[torch.Tensor]:
    leaves = pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]


def differentiable_outputs(out: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]


# -- what the OpInfo says about itself ------------------------------------------


def claim_device_type(op: Any, device_type: str) -> str:
    """Whose dtype claims stand for `device_type`: OpInfo's own entry if it has one (`cpu`,
    or a `dtypesIf` key); OpInfo knows no other accelerator, so for sim, neuron,
    privateuseone, meta, ... CUDA's claims stand in as "what an accelerator is expected to
    support"."""
    if device_type == "cpu" or device_type in op.dtypesIf:
        return device_type
    return "cuda"


def claimed(op: Any, dtype: torch.dtype, device_type: str) -> bool:
    return dtype in op.supported_dtypes(claim_device_type(op, device_type))


def tolerance_overrides(op: Any, dtype: torch.dtype, device_type: str, backward: bool) -> tuple[float | None, float | None]:
    """(rtol, atol): the loosest of the op's toleranceOverride/precisionOverride decorators that
    apply to comparing values in `dtype` on this kind of device (None: no override)."""
    tests = BACKWARD_TESTS if backward else FORWARD_TESTS
    claim = claim_device_type(op, device_type)
    rtol = atol = None
    for deco in op.decorators:
        decorators = [deco]
        if hasattr(deco, "is_active") and hasattr(deco, "decorators"):
            active = deco.active_if if not callable(deco.active_if) else False
            if not (active and deco.cls_name in (None, "TestCommon") and deco.test_name in (None, *tests)
                    and deco.device_type in (None, claim) and (deco.dtypes is None or dtype in deco.dtypes)):
                continue
            decorators = deco.decorators
        for d in decorators:
            tol = getattr(d, "d", None) if type(d).__name__ == "toleranceOverride" else None
            if tol and dtype in tol:
                atol = max(atol or 0.0, tol[dtype].atol)
                rtol = max(rtol or 0.0, tol[dtype].rtol)
            prec = getattr(d, "d", None) if type(d).__name__ == "precisionOverride" else None
            if prec and dtype in prec:
                atol = max(atol or 0.0, prec[dtype])
    return rtol, atol


# -- checks for undefined and random outputs ---------------------------------------


def wrong_device(dev_out: Any, device_type: str) -> str | None:
    """A reason when a tensor output of the device run is not on the device."""
    for index, leaf in enumerate(pytree.tree_leaves(dev_out)):
        if isinstance(leaf, torch.Tensor) and leaf.device.type != device_type:
            return f"output {index} is on {leaf.device}, not on {device_type}"
    return None


def check_metadata(dev: Any, ref: Any) -> Comparison:
    """Same structure, shapes and dtypes; values are not looked at."""
    dev_leaves, dev_spec = pytree.tree_flatten(dev)
    ref_leaves, ref_spec = pytree.tree_flatten(ref)
    if dev_spec != ref_spec:
        return Comparison(False, "structure", f"output structure differs: {dev_spec} vs {ref_spec}")
    for index, (d, r) in enumerate(zip(dev_leaves, ref_leaves)):
        if isinstance(r, torch.Tensor):
            if not isinstance(d, torch.Tensor):
                return Comparison(False, "structure", f"output {index}: expected a tensor", leaf=index)
            if d.shape != r.shape or d.dtype != r.dtype:
                return Comparison(False, "structure",
                                  f"output {index}: {d.dtype}{list(d.shape)} differs from CPU's {r.dtype}{list(r.shape)}",
                                  leaf=index)
    return Comparison(True, "structure")


def check_random_range(dev: Any, ref: Any) -> Comparison:
    """Metadata, plus: no NaN/Inf the CPU did not produce, values inside the CPU's range
    widened by its width (a draw from the same distribution lands there)."""
    meta = check_metadata(dev, ref)
    if not meta.ok:
        return meta
    for index, (d, r) in enumerate(zip(pytree.tree_leaves(dev), pytree.tree_leaves(ref))):
        if not isinstance(r, torch.Tensor) or r.numel() == 0 or r.is_complex():
            continue
        d64, r64 = d.detach().double(), r.detach().double()
        if bool((~d64.isfinite()).any()) and not bool((~r64.isfinite()).any()):
            return Comparison(False, "structure", f"output {index} has NaN/Inf where the CPU's has none", leaf=index)
        finite_r = r64[r64.isfinite()]
        finite_d = d64[d64.isfinite()]
        if finite_r.numel() == 0 or finite_d.numel() == 0:
            continue
        lo, hi = float(finite_r.min()), float(finite_r.max())
        width = max(hi - lo, abs(lo), abs(hi), 1.0)
        if float(finite_d.min()) < lo - width or float(finite_d.max()) > hi + width:
            return Comparison(False, "structure",
                              f"output {index} values [{float(finite_d.min()):.4g}, {float(finite_d.max()):.4g}] "
                              f"fall outside the plausible range around the CPU's [{lo:.4g}, {hi:.4g}]", leaf=index)
    return Comparison(True, "structure")


def guess_failing_op(ops: dict[str, int]) -> str | None:
    """The one compute op of a sample, when there is exactly one besides data movement."""
    compute = [name for name in ops if not _PLUMBING.match(name)]
    return compute[0] if len(compute) == 1 else None


# -- describing samples -----------------------------------------------------------

_SHORT_DTYPE = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int64: "i64", torch.int32: "i32", torch.bool: "bool", torch.complex64: "c64",
}


def describe(value: Any, limit: int = 300) -> str:
    """'f32[2, 3]' for tensors, reprs for the rest, nested; never tensor contents."""
    def one(v: Any) -> str:
        if isinstance(v, torch.Tensor):
            name = _SHORT_DTYPE.get(v.dtype, str(v.dtype).removeprefix("torch."))
            suffix = "" if v.layout != torch.strided or v.is_contiguous() else " noncontig"
            return f"{name}{list(v.shape)}{suffix}"
        if isinstance(v, (list, tuple)) and not isinstance(v, torch.Size):
            inner = ", ".join(one(x) for x in v)
            return f"[{inner}]" if isinstance(v, list) else f"({inner})"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}={one(x)}" for k, x in v.items()) + "}"
        text = repr(v)
        return text if len(text) <= 40 else text[:37] + "..."

    text = one(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_sample(index: int, sample: Any) -> str:
    parts = [f"input={describe(sample.input, 120)}"]
    if sample.args:
        parts.append(f"args={describe(sample.args, 120)}")
    if sample.kwargs:
        parts.append(f"kwargs={describe(sample.kwargs, 120)}")
    return f"sample {index}: " + ", ".join(parts)
