"""What the OpInfo suite judges besides the numerics rule: the op's own tolerance
overrides and dtype claims, and the checks for ops whose output values are
undefined or random. (Moving samples between devices: samples.py.)
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


def cuda_only(op: Any) -> bool:
    """True for OpInfos decorated with onlyCUDA (the jiterator entries): their reference
    implementation cannot run on the CPU at all."""
    return any(getattr(d, "__name__", None) == "onlyCUDA" for d in op.decorators)


def identical(dev: Any, ref: Any) -> bool:
    """Bitwise-equal outputs (same structure, dtypes, shapes, values; NaN makes it False)."""
    try:
        return _identical(dev, ref)
    except Exception:  # e.g. torch.equal has no kernel for complex32: let the rule decide
        return False


def _identical(dev: Any, ref: Any) -> bool:
    if type(ref) is torch.Tensor and type(dev) is torch.Tensor:  # most outputs: no tree to flatten
        return _identical_leaf(dev, ref)
    dev_leaves, dev_spec = pytree.tree_flatten(dev)
    ref_leaves, ref_spec = pytree.tree_flatten(ref)
    if dev_spec != ref_spec:
        return False
    return all(_identical_leaf(d, r) for d, r in zip(dev_leaves, ref_leaves))


def _identical_leaf(d: Any, r: Any) -> bool:
    if isinstance(r, torch.Tensor):
        return (isinstance(d, torch.Tensor) and d.dtype == r.dtype and d.shape == r.shape
                and d.layout == r.layout == torch.strided and torch.equal(d, r))
    return type(d) is type(r) and d == r


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
    leaves = (dev_out,) if isinstance(dev_out, torch.Tensor) else pytree.tree_leaves(dev_out)
    for index, leaf in enumerate(leaves):
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


FEW_DRAWS = 32
FEW_DRAWS_WIDENING = 4.0  # a standard normal's single draw near 0 still allows about +-4 sigma


def check_random_range(dev: Any, ref: Any, more_draws: list[Any] = ()) -> Comparison:
    """Metadata, plus: no NaN/Inf the CPU did not produce, values inside the CPU's range
    widened by its width (a draw from the same distribution lands there). `more_draws`: the
    CPU's outputs under other seeds; the range is that of all its draws together."""
    meta = check_metadata(dev, ref)
    if not meta.ok:
        return meta
    draws = [pytree.tree_leaves(d) for d in more_draws]
    for index, (d, r) in enumerate(zip(pytree.tree_leaves(dev), pytree.tree_leaves(ref))):
        if not isinstance(r, torch.Tensor) or r.numel() == 0 or r.is_complex():
            continue
        d64 = d.detach().double()
        r64 = torch.cat([r.detach().double().reshape(-1)] + [
            leaves[index].detach().double().reshape(-1) for leaves in draws
            if index < len(leaves) and isinstance(leaves[index], torch.Tensor) and leaves[index].shape == r.shape])
        if bool((~d64.isfinite()).any()) and not bool((~r64.isfinite()).any()):
            return Comparison(False, "structure", f"output {index} has NaN/Inf where the CPU's has none", leaf=index)
        finite_r = r64[r64.isfinite()]
        finite_d = d64[d64.isfinite()]
        if finite_r.numel() == 0 or finite_d.numel() == 0:
            continue
        lo, hi = float(finite_r.min()), float(finite_r.max())
        width = max(hi - lo, abs(lo), abs(hi), 1.0)
        if finite_r.numel() < FEW_DRAWS:  # a handful of CPU values says little about the range
            width *= FEW_DRAWS_WIDENING
        if float(finite_d.min()) < lo - width or float(finite_d.max()) > hi + width:
            return Comparison(False, "structure",
                              f"output {index} values [{float(finite_d.min()):.4g}, {float(finite_d.max()):.4g}] "
                              f"fall outside the plausible range around the CPU's [{lo:.4g}, {hi:.4g}]", leaf=index)
    return Comparison(True, "structure")


def guess_failing_op(ops: dict[str, int]) -> str | None:
    """The one compute op of a sample, when there is exactly one besides data movement."""
    compute = [name for name in ops if not _PLUMBING.match(name)]
    return compute[0] if len(compute) == 1 else None
