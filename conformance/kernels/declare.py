"""What a kernel library declares about its ops while TARGET is imported: references, sample
generators and families, keyed by the op's qualified name ("NS::NAME" or "NS::NAME.overload").

These tables are process-wide on purpose: a library declares at import time, as it registers
its ops with torch.library, and the suite reads them in the same process afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

REFERENCES: dict[str, Callable[..., Any]] = {}
SAMPLES: dict[str, Callable[..., Any]] = {}
FAMILIES: dict[str, str] = {}


def qualified_name(name: str) -> str:
    """'ns::op.default' -> 'ns::op'; other overloads keep their suffix."""
    name = name.strip()
    if "::" not in name:
        raise ValueError(f"an op is named 'NAMESPACE::NAME', not {name!r}")
    return name.removesuffix(".default")


def reference(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the decorated function, which takes the op's own arguments, as the reference of
    op `name`. It runs on CPU tensors, in the item's dtype and in float64 (the oracle)."""
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        REFERENCES[qualified_name(name)] = fn
        return fn

    return register


def samples(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the decorated `fn(device, dtype, requires_grad)` as the sample generator of op
    `name`: it yields `(args, kwargs)` (or `(args, kwargs, label)`) for the op."""
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        SAMPLES[qualified_name(name)] = fn
        return fn

    return register


def family(name: str, family_name: str) -> None:
    """Declare that op `name` follows a family's argument convention, so the family's generator
    makes its samples (conformance/kernels/families/)."""
    FAMILIES[qualified_name(name)] = family_name
