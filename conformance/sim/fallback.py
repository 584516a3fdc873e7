"""The one fallback: every aten op without a native sim kernel runs on CPU views of sim memory.

The native kernels (csrc/kernels.cpp) create tensors and handle storage and metadata; every
other op reaches `run` through a PrivateUse1 kernel registered here. `run` gives the CPU
kernel CPU tensors over the same memory as the sim arguments (no copy), applies the active
profile (unsupported op or dtype, CPU-fallback warning, faults), and hands the results back
as sim tensors:

* an output over the memory of a sim argument (a view) becomes a sim tensor on that
  argument's storage;
* an output written in place or through ``out=`` is that sim argument itself, resized or
  restrided if the CPU kernel did so;
* a new output keeps the memory the CPU kernel allocated, now owned by a sim tensor (no copy).
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten

from conformance.reference.accelerator_kernels import ACCELERATOR_KERNELS as _ACCELERATOR_KERNELS

from . import faults
from .dynamo_skip import skip_recursively
from .faults import DEVICE
from .native import module as native

_CPU = torch.device("cpu")

# Ops that legitimately take CPU tensors next to device tensors on real backends.
_CPU_ARGS_OK = frozenset(
    "copy_ _copy_from _copy_from_and_resize _to_copy index index_put index_put_ "
    "_index_put_impl_ _unsafe_index _unsafe_index_put tensor_split set_ lift_fresh "
    "lift_fresh_copy _has_compatible_shallow_copy_type equal is_same_size".split()
)
# Ops whose CompositeExplicitAutograd kernel (a metadata-only alias) stays C++: FakeTensor
# construction on device sim (DTensor's sharding propagation) detaches a meta tensor that
# carries the PrivateUse1 key, and a Python kernel there would hand back a Python-owned tensor.
_C10_ALIAS_KERNELS = frozenset({"aten::detach"})

_LAYOUT_KEYS = {
    torch.sparse_coo: "SparsePrivateUse1",
    torch.sparse_csr: "SparseCsrPrivateUse1",
    torch.sparse_csc: "SparseCsrPrivateUse1",
    torch.sparse_bsr: "SparseCsrPrivateUse1",
    torch.sparse_bsc: "SparseCsrPrivateUse1",
}


class _Schema:
    """What `run` needs to know about an op, worked out once per op."""

    __slots__ = ("returns", "seeded", "base_name", "name")

    def __init__(self, func):
        schema = func._schema
        write_args = {}
        for i, a in enumerate(schema.arguments):
            if a.alias_info is not None and a.alias_info.is_write:
                for s in a.alias_info.before_set:
                    write_args[s] = (i, a.name, a.kwarg_only)
        self.returns = []
        for r in schema.returns:
            ai = r.alias_info
            if ai is not None and ai.is_write:
                where = next((write_args[s] for s in ai.before_set if s in write_args), None)
                self.returns.append(("write", where))
            else:
                self.returns.append(("other", None))
        self.seeded = torch.Tag.nondeterministic_seeded in func.tags
        self.base_name = schema.name.split("::")[-1]
        self.name = str(func)


_SCHEMAS: dict = {}


def _arg(args, kwargs, pos, name, kwarg_only):
    if not kwarg_only and pos < len(args):
        return args[pos]
    return kwargs.get(name)


class _Scan:
    """What `run` learns while it turns an op's sim arguments into CPU views."""

    __slots__ = ("lib", "sims", "in_dtypes", "cpu_big", "to_sim", "generator", "named_index")

    def __init__(self, lib):
        self.lib, self.sims, self.in_dtypes = lib, [], set()
        self.cpu_big, self.to_sim, self.generator, self.named_index = False, None, None, None

    def leaf(self, x):
        if isinstance(x, torch.Tensor):
            if x.device.type == DEVICE:
                self.sims.append(x)
                self.in_dtypes.add(x.dtype)
                if type(x) is not torch.Tensor and _is_fake(x):
                    return _metadata_stand_in(x)
                return self.lib.cpu_view(x)
            if x.dim() > 0 and x.device.type == "cpu":
                self.cpu_big = True
        elif isinstance(x, torch.device):
            is_sim = x.type == DEVICE
            self.to_sim = is_sim if self.to_sim is None else (self.to_sim or is_sim)
            if is_sim:
                self.named_index = x.index if self.named_index is None else self.named_index
                return _CPU
        elif isinstance(x, torch.dtype):
            self.in_dtypes.add(x)
        elif isinstance(x, torch.Generator) and x.device.type == DEVICE:
            self.generator = x
            return None
        return x


def _is_fake(x: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return is_fake(x)


def _metadata_stand_in(fake: torch.Tensor) -> torch.Tensor:
    """A CPU tensor with `fake`'s metadata and no meaningful values, for a fake tensor that
    reaches a kernel. PyTorch's fake-tensor fallback (an op with no meta kernel, e.g. `geqrf`
    traced by torch.compile) makes real inputs with `zeros_like(fake, device=...)`, trusting the
    backend to read only sizes, strides and dtype, as CUDA's composite `zeros_like` does; a
    fake tensor has no memory to view."""
    return torch.empty_strided(fake.size(), fake.stride(), dtype=fake.dtype)


def _map_args(fn, args, kwargs):
    """`fn` applied to every argument of an aten call (its lists of tensors included: aten
    schemas nest no deeper), without pytree's generality, which costs more than the op."""

    def one(v):
        return type(v)(fn(e) for e in v) if isinstance(v, (list, tuple)) else fn(v)

    return tuple(one(v) for v in args), {k: one(v) for k, v in kwargs.items()}


def run(func, args, kwargs):
    info = _SCHEMAS.get(func)
    if info is None:
        info = _SCHEMAS[func] = _Schema(func)
    profile = faults.active_profile()
    lib = native()

    scan = _Scan(lib)
    cargs, ckwargs = _map_args(scan.leaf, args, kwargs)
    sims, in_dtypes, to_sim = scan.sims, scan.in_dtypes, scan.to_sim
    if to_sim is None:
        to_sim = True
    if sims and scan.cpu_big and info.base_name not in _CPU_ARGS_OK:
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, "
            f"{DEVICE}:0 and cpu! (when checking argument for {faults.c10_op_name(func)})"
        )
    name = info.name
    if profile is not None:
        faults.before(profile, func, name)
        faults.check_dtypes(profile, in_dtypes if to_sim else (x.dtype for x in sims))
    accelerator_kernel = _ACCELERATOR_KERNELS.get(name)
    recompute = None
    if profile is not None and faults.has_faults(profile) and faults.wants_recompute(profile, name):
        # Widened copies now: an in-place op is about to overwrite its inputs.
        wide_args, wide_kwargs = _map_args(faults.widened, cargs, ckwargs)
        if accelerator_kernel is not None:
            recompute = lambda: accelerator_kernel(func, wide_args, wide_kwargs)  # noqa: E731
        else:
            recompute = lambda: func(*wide_args, **wide_kwargs)  # noqa: E731

    index = _device_index(sims, scan.named_index)
    generator = scan.generator
    if info.seeded or generator is not None:
        lib.enter_rng(generator if generator is not None else lib.default_generator(index))
        try:
            out = func(*cargs, **ckwargs)
        finally:
            lib.leave_rng()
    elif accelerator_kernel is not None:
        out = accelerator_kernel(func, cargs, ckwargs)
    else:
        out = func(*cargs, **ckwargs)

    single = not isinstance(out, tuple)
    outs = [out] if single else list(out)
    returns = info.returns
    if profile is not None:
        out_tensors = [t for t in tree_flatten(outs)[0] if isinstance(t, torch.Tensor)]
        if to_sim:
            faults.check_dtypes(profile, (t.dtype for t in out_tensors))
        if faults.has_faults(profile):
            dtypes = {faults.dtype_name(d) for d in in_dtypes}
            dtypes |= {faults.dtype_name(t.dtype) for t in out_tensors}
            views = [_is_view(o, sims) for o in outs]
            outs = faults.after(profile, name, dtypes, outs, views, recompute)

    results = []
    for i, o in enumerate(outs):
        kind, where = returns[i] if i < len(returns) else ("other", None)
        if kind == "write" and where is not None:
            orig = _arg(args, kwargs, *where)
            if isinstance(orig, torch.Tensor) and orig.device.type == DEVICE and isinstance(o, torch.Tensor):
                lib.sync_written(orig, o)
                results.append(orig)
                continue
            if orig is not None and not isinstance(o, (list, tuple)):
                results.append(orig)
                continue
        results.append(_to_sim(o, sims, index, func) if to_sim else o)
    return results[0] if single else tuple(results)


def _device_index(sims, named: int | None) -> int:
    """The device an op runs on: its first sim tensor's, else the sim device it names."""
    index = sims[0].device.index if sims else named
    return native().current_device() if index is None else index


def _is_view(out, sims) -> bool:
    lib = native()
    return isinstance(out, torch.Tensor) and any(lib.shares_memory(s, out) for s in sims)


def _to_sim(value, sims, index, func):
    if isinstance(value, (list, tuple)):
        return type(value)(_to_sim(v, sims, index, func) for v in value)
    if not isinstance(value, torch.Tensor) or value.device.type != "cpu":
        return value
    if value.layout != torch.strided:  # like most accelerators, sim holds strided tensors only
        raise faults.not_implemented(func, _LAYOUT_KEYS.get(value.layout, str(value.layout)))
    lib = native()
    for s in sims:
        if lib.shares_memory(s, value):
            return lib.alias_of(s, value)
    return lib.adopt(value, index)


def _fallback_kernel(op, *args, **kwargs):
    return run(op, args, kwargs)


def _resolve(qualname: str):
    packet, _, overload = qualname.split("::", 1)[1].partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def _op_kernel(qualname: str):
    op = None

    def kernel(*args, **kwargs):
        nonlocal op
        if op is None:
            op = _resolve(qualname)
        return run(op, args, kwargs)

    return kernel


_LIBS: list = []
# The aten ops with a native sim kernel (csrc/kernels.cpp), found when the fallback is installed.
_NATIVE: list[str] = []
_overrides: list = []  # the Library holding the profile's overrides of native kernels, if any


def install() -> None:
    """Register the fallback on the PrivateUse1 key (once per process).

    A global fallback serves ops of any namespace that have no sim kernel. An aten op with a
    CompositeExplicitAutograd kernel would run that kernel instead (decomposed, under other
    op names than the profile names), so every aten op that does not decompose implicitly
    and has no native sim kernel gets the fallback as its own PrivateUse1 kernel, as a
    backend registers its kernels op by op.
    """
    if _LIBS:
        return
    fallback = torch.library.Library("_", "IMPL")
    fallback.fallback(_fallback_kernel, dispatch_key="PrivateUse1")
    per_op = torch.library.Library("aten", "IMPL")
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    kernel = None
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::") or name in _C10_ALIAS_KERNELS:
            continue
        if has(name, "CompositeImplicitAutograd"):
            continue
        if has(name, "PrivateUse1"):
            _NATIVE.append(name)
            continue
        kernel = _op_kernel(name)
        per_op.impl(name[len("aten::"):], kernel, "PrivateUse1")
    _LIBS.extend([fallback, per_op])
    # Every per-op kernel shares one code object, so marking the last marks them all.
    skip_recursively(run, _fallback_kernel, *([kernel] if kernel else []))


def route_profile_ops(profile) -> None:
    """Send the native ops that `profile` names (unsupported, fallback, faulty) through `run`,
    so the profile applies to them as to any op; with no profile, native kernels serve again."""
    import fnmatch
    import warnings

    if _overrides:
        _overrides.pop()._destroy()
    if profile is None or not _NATIVE:
        return
    patterns = [*profile.unsupported_ops, *profile.fallback_ops, *(f.op for f in profile.faults),
                *(f.op for f in profile.compile_faults)]
    named = [q for q in _NATIVE if any(fnmatch.fnmatchcase(str(_resolve(q)), p) for p in patterns)]
    if not named:
        return
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel": meant
        for q in named:
            lib.impl(q[len("aten::"):], _op_kernel(q), "PrivateUse1")
    _overrides.append(lib)
