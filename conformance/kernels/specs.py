"""Each op of a kernel library with its reference and its samples, as TARGET declared them."""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Callable, Iterator
from typing import Any

from op_db.errors import InputError

# Dispatch keys whose kernel can serve as the reference when run on CPU tensors.
REFERENCE_KEYS = ("CPU", "CompositeExplicitAutograd", "CompositeImplicitAutograd")


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    name: str  # "NS::NAME"
    reference: str  # where the reference comes from, in words
    samples: str  # "declared" or "family <name>"


def specs_for(options: Any) -> list[KernelSpec]:
    """The selected ops of `options.target`, each with a reference and samples; InputError (one
    sentence naming every op concerned) when an op lacks either."""
    from conformance.kernels import declare, target

    loaded = target.load(options.target)
    families = families_by_op(options.family)
    specs, lacking = [], []
    for name in select(loaded.ops, options.ops, options.target):
        reference = reference_source(name)
        samples = "declared" if name in declare.SAMPLES else _family_of(name, families)
        missing = [what for what, found in (("reference", reference), ("samples", samples)) if found is None]
        if missing:
            lacking.append(f"{name} has no {' and no '.join(missing)}")
        else:
            specs.append(KernelSpec(name, reference, samples))
    if lacking:
        raise InputError(f"{options.target}: {'; '.join(lacking)}. Declare them with "
                         "@conformance.kernels.reference / @conformance.kernels.samples, "
                         "conformance.kernels.family(...) or --family, or leave the op out with --op.")
    return specs


def reference_source(name: str) -> str | None:
    """'declared', or the dispatch key of the kernel that runs on CPU tensors; None when none does."""
    import torch

    from conformance.kernels import declare

    if name in declare.REFERENCES:
        return "declared"
    for key in REFERENCE_KEYS:
        if torch._C._dispatch_has_kernel_for_dispatch_key(name, key):
            return f"its {key} kernel"
    return None


def _family_of(name: str, families: dict[str, str]) -> str | None:
    from conformance.kernels import declare

    family = declare.FAMILIES.get(name) or families.get(name) or families.get("*")
    return f"family {family}" if family else None


def reference_fn(name: str) -> Callable[..., Any]:
    """What computes the reference: the declared function, or the op itself (on CPU tensors)."""
    from conformance.kernels import declare, target

    return declare.REFERENCES.get(name) or target.resolve(name)


def sample_fn(name: str, families: dict[str, str]) -> Callable[[str, Any, bool], Iterator[Any]]:
    """`fn(device, dtype, requires_grad)` yielding the op's samples, declared or from its family."""
    from conformance.kernels import declare, target
    from conformance.kernels.families import FAMILIES

    if name in declare.SAMPLES:
        return declare.SAMPLES[name]
    family = declare.FAMILIES.get(name) or families.get(name) or families.get("*")
    if family not in FAMILIES:
        raise InputError(f"{name}: unknown family {family!r}; use one of {', '.join(FAMILIES)}.")
    schema = target.resolve(name)._schema
    return lambda device, dtype, requires_grad: FAMILIES[family](schema, dtype, requires_grad)


def families_by_op(text: str | None) -> dict[str, str]:
    """--family 'attention' -> {"*": "attention"}; 'a::x=norm,b::y=moe' -> per op."""
    from conformance.kernels.declare import qualified_name
    from conformance.kernels.families import FAMILIES

    found: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, sep, family = part.rpartition("=") if "=" in part else ("*", "=", part)
        if family not in FAMILIES:
            raise InputError(f"unknown family {family!r} in --family; use one of {', '.join(FAMILIES)}.")
        found["*" if name == "*" else qualified_name(name)] = family
    return found


def select(ops: tuple[str, ...], patterns: tuple[str, ...], target: str) -> list[str]:
    """The ops `patterns` name (all when none); InputError naming every pattern that matches nothing."""
    if not patterns:
        return list(ops)
    unmatched = [p for p in patterns if not fnmatch.filter(ops, p) and p.removesuffix(".default") not in ops]
    if unmatched:
        raise InputError(f"--op {', '.join(unmatched)} matches no op of {target}; its ops: {', '.join(ops)}.")
    return [op for op in ops if any(fnmatch.fnmatch(op, p) or op == p.removesuffix(".default") for p in patterns)]
