"""The `sim` tensor: a PrivateUse1 wrapper subclass holding a CPU tensor, and the one fallback
that runs every aten op on CPU.

Two entry points reach `_run`:

* `SimTensor.__torch_dispatch__` -- any op with a sim tensor argument;
* the PrivateUse1 fallback registered by `install_fallback` -- factory ops
  (``torch.empty(..., device="sim")``) that have no tensor argument.

`_run` unwraps sim tensors to their CPU tensors and sim devices to ``cpu``, applies the active
profile (unsupported op/dtype, CPU-fallback warning, faults), runs the op on CPU and wraps the
results. View ops run on the held CPU tensor, so a view's CPU storage aliases its base's and
in-place updates through either show in both. In-place and out= ops return their (sim) input
object, with its metadata updated if the CPU kernel resized or restrided it.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from . import faults
from .dynamo_skip import skip_recursively
from .faults import DEVICE

_CPU = torch.device("cpu")
_TO_COPY = torch.ops.aten._to_copy.default
# What a sim tensor holds while AOTAutograd traces through it, instead of CPU data.
_TRACED_INNER = (FakeTensor, FunctionalTensor)
_META_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.Meta)
_SET_META = torch.ops.aten.set_.source_Storage_storage_offset

# Ops that legitimately take CPU tensors next to device tensors on real backends.
_CPU_ARGS_OK = frozenset(
    "copy_ _copy_from _copy_from_and_resize _to_copy index index_put index_put_ "
    "_index_put_impl_ _unsafe_index _unsafe_index_put tensor_split set_ lift_fresh "
    "lift_fresh_copy _has_compatible_shallow_copy_type equal is_same_size".split()
)


class SimTensor(torch.Tensor):
    """A tensor on device ``sim``; its data is the CPU tensor in ``_cpu``."""

    _cpu: torch.Tensor
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, cpu: torch.Tensor, requires_grad: bool = False):
        r = torch.Tensor._make_wrapper_subclass(
            cls,
            cpu.size(),
            strides=cpu.stride(),
            storage_offset=cpu.storage_offset(),
            dtype=cpu.dtype,
            device=torch.device(DEVICE, 0),
            requires_grad=requires_grad,
            # An empty tensor still gets one element of (data-less) storage: dynamo fakes a
            # zero-byte storage by resizing it, which a Python-registered PrivateUse1 cannot do.
            **({"storage_size": cpu.element_size()} if _known_empty(cpu) else {}),
        )
        r._cpu = cpu
        # Mirror the lazy conj/neg bits: the Conjugate/Negative fallbacks must run on the
        # sim tensor, as they are excluded once inside __torch_dispatch__.
        if cpu.is_conj():
            torch._C._set_conj(r, True)
        if cpu.is_neg():
            torch._C._set_neg(r, True)
        return r

    def __repr__(self, *, tensor_contents=None):
        if tensor_contents is None and not _holds_real_data(self):
            # While AOTAutograd or dynamo traces, `_cpu` is a FakeTensor (or a functional
            # wrapper) with no data; printing contents would run data-dependent ops on it.
            tensor_contents = "..."
        if tensor_contents is None:
            with torch.no_grad():
                tensor_contents = torch._tensor_str._tensor_str(self._cpu.detach(), len("tensor("))
        text = torch._tensor_str._str(self, tensor_contents=tensor_contents)
        return "tensor(" + text[len("SimTensor("):] if text.startswith("SimTensor(") else text

    def untyped_storage(self):
        # The held CPU tensor's storage is the sim tensor's memory: FSDP2 frees and
        # re-allocates unsharded parameters by resizing it, as on a real device.
        if _holds_real_data(self) and not torch.compiler.is_compiling():
            return self._cpu.untyped_storage()
        return torch.Tensor.untyped_storage(self)

    def tolist(self):
        return self.detach().cpu().tolist()

    def numpy(self, *, force: bool = False):
        if not force:
            raise TypeError(
                f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() "
                "to copy the tensor to host memory first."
            )
        return self.detach().cpu().numpy()

    def __format__(self, format_spec):
        if self.dim() == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _run(func, args, kwargs or {})

    # Traceable-subclass protocol, so torch.compile / AOTAutograd can trace through sim.
    def __tensor_flatten__(self):
        return ["_cpu"], None

    @staticmethod
    def __tensor_unflatten__(inner_tensors, meta, outer_size, outer_stride):
        return SimTensor(inner_tensors["_cpu"])


def _known_empty(t: torch.Tensor) -> bool:
    """No elements, known without guessing (a traced size may be symbolic)."""
    numel = t.numel()
    return type(numel) is int and numel == 0


def _holds_real_data(t: SimTensor) -> bool:
    inner = getattr(t, "_cpu", None)
    return type(inner) is torch.Tensor and inner.device.type == "cpu"


def _sync_metadata(t: SimTensor) -> None:
    """Make the wrapper's size/stride/offset follow its CPU tensor after an in-place op."""
    c = t._cpu
    if t.size() == c.size() and t.stride() == c.stride() and t.storage_offset() == c.storage_offset():
        return
    with torch._C._DisableTorchDispatch():
        _SET_META.redispatch(
            _META_KEYS, t, torch.Tensor.untyped_storage(t), c.storage_offset(), c.size(), c.stride()
        )


@contextmanager
def _sim_rng():
    """Run a random op on the sim generator: swap it in as CPU's default generator."""
    from .device_module import generator

    cpu_default = torch.default_generator
    saved = cpu_default.get_state()
    cpu_default.set_state(generator().get_state())
    try:
        yield
    finally:
        generator().set_state(cpu_default.get_state())
        cpu_default.set_state(saved)


def _schema_info(func):
    cached = _SCHEMA_CACHE.get(func)
    if cached is None:
        schema = func._schema
        write_args = {}
        for i, a in enumerate(schema.arguments):
            if a.alias_info is not None and a.alias_info.is_write:
                for s in a.alias_info.before_set:
                    write_args[s] = (i, a.name, a.kwarg_only)
        returns = []
        for r in schema.returns:
            ai = r.alias_info
            if ai is not None and ai.is_write:
                returns.append(("write", next((write_args[s] for s in ai.before_set if s in write_args), None)))
            elif ai is not None:
                returns.append(("view", None))
            else:
                returns.append(("new", None))
        seeded = torch.Tag.nondeterministic_seeded in func.tags
        cached = (returns, seeded, func._schema.name.split("::")[-1])
        _SCHEMA_CACHE[func] = cached
    return cached


_SCHEMA_CACHE: dict = {}


def _arg(args, kwargs, pos, name, kwarg_only):
    if not kwarg_only and pos < len(args):
        return args[pos]
    return kwargs.get(name)


def _copy_fast(func, args, kwargs):
    """`_to_copy` between the CPU and sim with no profile active: the same result as the general
    path below (unwrap, copy on the CPU, wrap), without flattening the arguments; None when the
    call needs the general path (a traced inner tensor, a non-strided result)."""
    source = args[0]
    inner = source._cpu if isinstance(source, SimTensor) else source
    if type(inner) is not torch.Tensor or inner.device.type != "cpu" or len(args) != 1:
        return None
    target = kwargs.get("device")
    to_sim = target is None or target.type == DEVICE
    if target is not None and to_sim:
        kwargs = {**kwargs, "device": _CPU}
    out = func(inner, **kwargs)
    if not to_sim:
        return out
    return SimTensor(out) if out.layout == torch.strided else None


def _run(func, args, kwargs):
    profile = faults.active_profile()
    if func is _TO_COPY and profile is None:
        out = _copy_fast(func, args, kwargs)
        if out is not None:
            return out
    name = str(func)
    returns, seeded, base_name = _schema_info(func)

    flat, spec = tree_flatten((args, kwargs))
    cpu_flat, in_dtypes, sim_in, cpu_big, to_sim = [], set(), False, False, None
    tracing = False
    for x in flat:
        if isinstance(x, SimTensor):
            sim_in = True
            in_dtypes.add(x.dtype)
            x = x._cpu
            tracing = tracing or isinstance(x, _TRACED_INNER)
        elif isinstance(x, torch.Tensor):
            if x.device.type == DEVICE:
                # Only tracing makes a sim-device tensor that is no SimTensor: a factory op
                # (arange(device="sim")) under the fake mode. Meet the held CPU tensors on the
                # CPU; the copy is traced too, and a compiled graph runs it on sim again.
                x, tracing = x.to(_CPU), True
            elif x.dim() > 0 and x.device.type == "cpu":
                cpu_big = True
        elif isinstance(x, torch.device):
            is_sim = x.type == DEVICE
            to_sim = is_sim if to_sim is None else (to_sim or is_sim)
            if is_sim:
                x = _CPU
        elif isinstance(x, torch.dtype):
            in_dtypes.add(x)
        cpu_flat.append(x)
    if to_sim is None:
        to_sim = True
    if tracing:
        # AOTAutograd traces through sim with fake inner tensors: the graph records the ops;
        # the profile applies when the compiled graph runs on sim kernels (see compiler.py).
        profile = None
    if sim_in and cpu_big and base_name not in _CPU_ARGS_OK:
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, "
            f"{DEVICE}:0 and cpu! (when checking argument for {faults.c10_op_name(func)})"
        )
    if profile is not None:
        faults.before(profile, func, name)
        if to_sim:
            faults.check_dtypes(profile, in_dtypes)
        else:
            faults.check_dtypes(profile, (x.dtype for x in flat if isinstance(x, SimTensor)))
    cargs, ckwargs = tree_unflatten(cpu_flat, spec)
    recompute = None
    if profile is not None and faults.has_faults(profile) and faults.wants_recompute(profile, name):
        # Widened copies now: an in-place op is about to overwrite its inputs.
        wide_args, wide_kwargs = tree_unflatten([faults.widened(x) for x in cpu_flat], spec)
        recompute = lambda: func(*wide_args, **wide_kwargs)  # noqa: E731

    if seeded:
        with _sim_rng():
            out = func(*cargs, **ckwargs)
    elif name in _ACCELERATOR_KERNELS:
        out = _ACCELERATOR_KERNELS[name](func, cargs, ckwargs)
    else:
        out = func(*cargs, **ckwargs)

    single = not isinstance(out, tuple)
    outs = [out] if single else list(out)
    if profile is not None:
        out_tensors = [t for t in tree_flatten(outs)[0] if isinstance(t, torch.Tensor)]
        if to_sim:
            faults.check_dtypes(profile, (t.dtype for t in out_tensors))
        if faults.has_faults(profile):
            dtypes = {faults.dtype_name(d) for d in in_dtypes}
            dtypes |= {faults.dtype_name(t.dtype) for t in out_tensors}
            kinds = [r[0] for r in returns] if len(returns) == len(outs) else ["new"] * len(outs)
            outs = faults.after(profile, name, dtypes, outs, [k == "view" for k in kinds], recompute)

    wrapped = []
    for i, o in enumerate(outs):
        kind, where = returns[i] if i < len(returns) else ("new", None)
        if kind == "write" and where is not None:
            orig = _arg(args, kwargs, *where)
            if isinstance(orig, SimTensor):
                if o is not orig._cpu and isinstance(o, torch.Tensor):
                    orig._cpu = o
                _sync_metadata(orig)
                wrapped.append(orig)
                continue
            if orig is not None and not isinstance(o, (list, tuple)):
                if isinstance(orig, torch.Tensor) and isinstance(o, torch.Tensor) and o is not orig:
                    # Tracing wrote into the CPU copy of a tensor a factory made on sim (a cache
                    # allocated on first use): write it back, so the trace records the update.
                    orig.copy_(o)
                wrapped.append(orig)
                continue
        wrapped.append(_wrap(o, func) if to_sim else o)
    return wrapped[0] if single else tuple(wrapped)


def _histc_any_dtype(func, args, kwargs):
    x = args[0]
    if x.is_floating_point():
        return func(*args, **kwargs)
    return func(x.double(), *args[1:], **kwargs).to(x.dtype)


# Ops whose CPU kernel lacks dtypes that accelerator kernels have, and that real
# code relies on: Transformers' grouped-matmul MoE path calls histc on int32
# tensors on every non-CPU device (CUDA's histc takes integers).
_ACCELERATOR_KERNELS = {"aten.histc.default": _histc_any_dtype}


def _wrap(x, func):
    def one(t):
        if not isinstance(t, torch.Tensor) or isinstance(t, SimTensor):
            return t
        if t.layout != torch.strided:  # like most accelerators, sim holds strided tensors only
            raise faults.not_implemented(func, _LAYOUT_KEYS.get(t.layout, str(t.layout)))
        return SimTensor(t)

    return tree_map(one, x)


_LAYOUT_KEYS = {
    torch.sparse_coo: "SparsePrivateUse1",
    torch.sparse_csr: "SparseCsrPrivateUse1",
    torch.sparse_csc: "SparseCsrPrivateUse1",
    torch.sparse_bsr: "SparseCsrPrivateUse1",
    torch.sparse_bsc: "SparseCsrPrivateUse1",
}


def _fallback_kernel(op, *args, **kwargs):
    """PrivateUse1 fallback: reached by ops without sim tensor args (factories)."""
    return _run(op, args, kwargs)


def _resolve(qualname: str):
    packet, _, overload = qualname.split("::", 1)[1].partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def _op_kernel(qualname: str):
    op = None

    def kernel(*args, **kwargs):
        nonlocal op
        if op is None:
            op = _resolve(qualname)
        return _run(op, args, kwargs)

    return kernel


_LIBS: list = []
# Ops whose CompositeExplicitAutograd kernel (a metadata-only alias) must stay C++: FakeTensor
# construction on device sim (DTensor's sharding propagation) detaches a meta tensor that
# carries the PrivateUse1 key, and a Python kernel there would hand back a Python-owned tensor.
_C10_ALIAS_KERNELS = frozenset({"aten::detach"})


def install_fallback() -> None:
    """Register the CPU-running kernels on the PrivateUse1 key (once per process).

    A global fallback serves any other op. Ops that do not decompose (no CompositeImplicitAutograd
    kernel) get an explicit
    PrivateUse1 kernel: when C++ code reaches PrivateUse1 with the Python key excluded (e.g.
    ``torch.tensor(data, device="sim")`` copying into a sim tensor) with a sim tensor argument,
    PyTorch can only route the call to a per-op Python registration, not to a fallback.
    """
    if _LIBS:
        return
    fallback = torch.library.Library("_", "IMPL")
    fallback.fallback(_fallback_kernel, dispatch_key="PrivateUse1")
    per_op = torch.library.Library("aten", "IMPL")
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for name in torch._C._dispatch_get_all_op_names():
        if name in _C10_ALIAS_KERNELS:
            continue
        if name.startswith("aten::") and not has(name, "CompositeImplicitAutograd"):
            kernel = _op_kernel(name)
            per_op.impl(name[len("aten::"):], kernel, "PrivateUse1")
    _LIBS.extend([fallback, per_op])
    # Every per-op kernel shares one code object, so marking the last marks them all.
    skip_recursively(SimTensor.__torch_dispatch__, _fallback_kernel, kernel)
