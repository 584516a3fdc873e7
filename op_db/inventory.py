"""Op inventory: what the dispatcher has registered for a backend. (Which aten overloads
each OpInfo subject hit is measured per result: `Result.aten_ops`.)

Registration kinds, checked in this order for every aten op (the first that
holds wins):

* `direct`: a kernel registered on the backend's own dispatch key;
* `CompositeExplicitAutogradNonFunctional`, `CompositeExplicitAutograd`: a
  kernel written once for every backend, in terms of other ops;
* `CompositeImplicitAutograd`: the op decomposes into other ops;
* `fallback`: nothing for this op, but the backend registered a boxed
  fallback for its key (which may run it on CPU, or raise);
* `missing`: nothing at all; calling it on the device raises.

On the `sim` device a profile stands in for a real backend's gaps, so of the ops that reach
the backend (direct or fallback), its `unsupported_ops` are `missing` (they raise what a backend
without the kernel raises) and its `fallback_ops` `fallback` (they run through the CPU fallback).
A composite op named there still decomposes before the backend sees it, so it stays composite.

`torch._C._dispatch_has_computed_kernel_for_dispatch_key` is not used: once a
backend fallback exists it is true for every op, so it cannot mean "supported".
These are static facts; whether the kernel computes the right thing is what
the OpInfo suite measures.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

KINDS = (
    "direct",
    "CompositeExplicitAutogradNonFunctional",
    "CompositeExplicitAutograd",
    "CompositeImplicitAutograd",
    "fallback",
    "missing",
)
_COMPOSITE_KEYS = KINDS[1:4]
# Kinds whose calls reach the backend itself; a composite runs as other ops and never does.
_BACKEND_RUNS = ("direct", "fallback")


def overload_name(dispatcher_name: str) -> str:
    """'aten::add.Tensor' -> 'aten.add.Tensor'; 'aten::cumprod' -> 'aten.cumprod.default'.

    The same spelling as `str(OpOverload)`, which results and profiles use.
    """
    namespace, _, rest = dispatcher_name.partition("::")
    if "." not in rest:
        rest += ".default"
    return f"{namespace}.{rest}"


def has_backend_fallback(dispatch_key: str) -> bool:
    import torch

    key = getattr(torch._C.DispatchKey, dispatch_key, None)
    probe = getattr(torch._C, "_dispatch_has_backend_fallback", None)
    if key is None or probe is None:
        return False
    return bool(probe(key))


def dispatcher_coverage(dispatch_key: str, namespace: str = "aten", profile: Any = None) -> list[tuple[str, str]]:
    """(overload, kind) for every registered op of `namespace`, sorted by overload; `profile`: the
    sim profile in force (BackendAdapter.coverage_profile), whose gaps override registrations."""
    import torch

    from op_db.errors import InputError

    if getattr(torch._C.DispatchKey, dispatch_key, None) is None:
        raise InputError(f"{dispatch_key!r} is not a dispatch key this torch knows.")
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    fallback = has_backend_fallback(dispatch_key)
    prefix = f"{namespace}::"
    rows = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith(prefix):
            continue
        if has_kernel(name, dispatch_key):
            kind = "direct"
        else:
            kind = next((k for k in _COMPOSITE_KEYS if has_kernel(name, k)), None)
            kind = kind or ("fallback" if fallback else "missing")
        op = overload_name(name)
        if profile is not None and kind in _BACKEND_RUNS:
            kind = "missing" if profile.is_unsupported_op(op) else "fallback" if profile.is_fallback_op(op) else kind
        rows.append((op, kind))
    rows.sort()
    return rows


def coverage_summary(rows: Iterable[tuple[str, str]]) -> dict[str, int]:
    counts = Counter(kind for _, kind in rows)
    return {kind: counts.get(kind, 0) for kind in KINDS}


def store_coverage(store: Any, run_id: int, adapter: Any) -> int:
    """Record the dispatcher coverage of `adapter`'s dispatch key with a run (the `ops` command calls this).

    The adapter must be initialised, so its kernels are registered. Returns the number of ops stored.
    """
    rows = dispatcher_coverage(adapter.dispatch_key, profile=adapter.coverage_profile())
    store.set_coverage(run_id, rows)
    return len(rows)
