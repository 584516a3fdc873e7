"""OpInfo samples: copies on the device, on the CPU and in float64, and short descriptions.

A SampleInput is copied whole (input, args, kwargs) with one function applied to every
tensor; `to_device` keeps the copies independent of the CPU reference's inputs, so an op
that writes its input in place cannot reach the reference.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import torch
from torch.utils import _pytree as pytree

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
        if dtype_map and dataclasses.is_dataclass(value) and not isinstance(value, type):
            return _widened_options(value, dtype_map)
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


def _widened_options(options: Any, dtype_map: dict[torch.dtype, torch.dtype]) -> Any:
    """An options object (F.linear_cross_entropy's) with its floating dtype fields (an
    accumulation dtype) widened to the oracle's dtype too: an oracle accumulates exactly."""
    wide = next(iter(dtype_map.values()))
    if not wide.is_floating_point:
        return options
    changes = {f.name: wide for f in dataclasses.fields(options) if f.init
               and isinstance(getattr(options, f.name), torch.dtype) and getattr(options, f.name).is_floating_point
               and getattr(options, f.name).itemsize < wide.itemsize}
    try:
        return dataclasses.replace(options, **changes) if changes else options
    except Exception:  # an options class that refuses the change keeps its own
        return options


def to_device(sample: Any, device: str, stay_on_cpu: frozenset[int] = frozenset(), adapter: Any = None,
              originals: list[torch.Tensor] | None = None):
    """A copy of the sample on `device` (a copy even for cpu, so in-place ops cannot reach the
    reference's inputs); tensors that require grad become new leaves there. Tensors whose
    position (in traversal order) is in `stay_on_cpu` stay on the CPU (see `cpu_positions`).
    `adapter` (a BackendAdapter) makes the copies, through its fastest path to the device.
    `originals`, if given, receives the sample's own tensors in traversal order: what
    `sample_tensors` finds, without a second walk."""
    position = iter(range(1 << 30))
    copy = _plain_copy if adapter is None else adapter.copy_to_device

    def move(t: torch.Tensor) -> torch.Tensor:
        if originals is not None:
            originals.append(t)
        target = "cpu" if next(position) in stay_on_cpu else device
        copy_to = copy if target == device else _plain_copy
        if not t.requires_grad:
            return _copy_with_base(t, target, copy_to)
        # The new leaf keeps the view's place in its base: autograd's formulas for views
        # (as_strided's backward) read that geometry.
        base = t._base.detach() if t._base is not None else None
        return _copy_with_base(t.detach(), target, copy_to, base).requires_grad_(True)
    return transform_sample(sample, move, device=device)


def _plain_copy(t: torch.Tensor, target: str) -> torch.Tensor:
    return t.to(target, copy=True)


def _copy_with_base(t: torch.Tensor, target: str, copy=_plain_copy, base: torch.Tensor | None = None) -> torch.Tensor:
    """Copy `t`; a view of a larger contiguous base (`t._base` unless given) carries the whole
    base, so ops that read storage outside the view (as_strided.partial_views) see the same
    memory as on the CPU."""
    base = t._base if base is None else base
    if base is None or not base.is_contiguous() or t.layout != torch.strided:
        return copy(t, target)
    moved = copy(base, target)
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


def sample_tensors(sample: Any) -> list[torch.Tensor]:
    """The sample's tensors in traversal order (input, args, kwargs; through lists, tuples and
    dicts, the containers `transform_sample` copies), found once per sample."""
    found: list[torch.Tensor] = []

    def walk(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
    walk((sample.input, sample.args, sample.kwargs))
    return found


def tensor_versions(tensors: list[torch.Tensor]) -> list[int]:
    """In-place update counters of a sample's tensors (`sample_tensors`): they move when an op
    writes its input."""
    return [t._version for t in tensors]


def to_cpu(value: Any, adapter: Any = None) -> Any:
    """Device outputs copied to the CPU, outside autograd (one device op per tensor: a tensor
    that does not require grad needs no device-side detach); `adapter` makes the copies."""
    copy = _tensor_to_cpu if adapter is None else adapter.copy_to_cpu
    if isinstance(value, torch.Tensor):  # most ops' whole output: no tree to walk
        return copy(value)
    return pytree.tree_map(lambda t: copy(t) if isinstance(t, torch.Tensor) else t, value)


def _tensor_to_cpu(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu") if t.requires_grad else t.to("cpu")


def grad_inputs(sample: Any) -> list[torch.Tensor]:
    leaves = pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]


def differentiable_outputs(out: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]


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
