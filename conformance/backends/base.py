"""What neuron-check needs to know about a backend (DESIGN.md, "Backends").

An adapter is cheap to construct and imports nothing heavy; `init()` does the
work of importing and initialising the backend's Python package.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import warnings
from collections import Counter
from collections.abc import Iterator
from typing import Any

from op_db.errors import InputError

# Phrases by which real backends announce that an op ran through the CPU fallback.
FALLBACK_WARNING_MARKERS = (
    "fall back to run on the cpu",
    "falls back to the cpu",
    "fallback to cpu",
    "cpu fallback",
)


class FallbackTracker:
    """Collects the aten ops that ran through a backend's CPU fallback."""

    def __init__(self) -> None:
        self.ops: Counter[str] = Counter()

    def add(self, op: str, count: int = 1) -> None:
        self.ops[op] += count


class BackendAdapter:
    """Base adapter. Subclasses set the class attributes and override hooks."""

    name: str = ""
    device_type: str = ""
    dispatch_key: str = ""
    compile_backend: str = "inductor"
    module: str | None = None  # Python package to import to make the device usable
    package: str | None = None  # distribution whose version is recorded
    simulated: bool = False
    never_supported_dtypes: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self._initialised = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} device={self.device_type!r}>"

    # -- availability --------------------------------------------------------

    def _import_module(self) -> Any | None:
        if self.module is None:
            return None
        return importlib.import_module(self.module)

    def _torch_module(self) -> Any:
        import torch

        return getattr(torch, self.device_type, None)

    def is_available(self) -> bool:
        try:
            self._import_module()
        except Exception:
            return False
        mod = self._torch_module()
        try:
            return bool(mod is not None and mod.is_available())
        except Exception:
            return False

    def device_count(self) -> int:
        if not self.is_available():
            return 0
        mod = self._torch_module()
        try:
            return int(mod.device_count())
        except Exception:
            return 1

    def init(self) -> "BackendAdapter":
        """Import and initialise the backend; raise InputError if it is unusable."""
        if self._initialised:
            return self
        try:
            self._import_module()
        except ImportError as exc:
            raise InputError(
                f"device {self.name!r} is not available: cannot import {self.module} ({exc})."
            ) from None
        if not self.is_available():
            raise InputError(f"device {self.name!r} is not available on this machine.")
        self._initialised = True
        return self

    def device(self, index: int | None = None) -> str:
        return self.device_type if index is None else f"{self.device_type}:{index}"

    # -- versions ------------------------------------------------------------

    def versions(self) -> dict[str, str]:
        import torch

        found = {"torch": torch.__version__}
        if self.package:
            try:
                found[self.package] = importlib.metadata.version(self.package)
            except importlib.metadata.PackageNotFoundError:
                pass
        return found

    def backend_version(self) -> str | None:
        return self.versions().get(self.package) if self.package else None

    # -- runtime hooks -------------------------------------------------------

    def synchronize(self) -> None:
        mod = self._torch_module()
        if mod is not None and hasattr(mod, "synchronize"):
            mod.synchronize()

    def manual_seed(self, seed: int) -> None:
        """Seed the CPU generator and this device's. (Not torch.manual_seed: it also queues a
        lazy seeding call, with a captured stack, for every other backend torch knows of;
        milliseconds each time, and suites seed once per item.)"""
        import torch

        torch.default_generator.manual_seed(seed)
        mod = self._torch_module()
        if mod is not None and hasattr(mod, "manual_seed_all"):
            mod.manual_seed_all(seed)

    def copy_to_device(self, t: Any, device: str) -> Any:
        """A copy of CPU tensor `t` on `device`: the harness moves every sample tensor through here."""
        return t.to(device, copy=True)

    def copy_to_cpu(self, t: Any) -> Any:
        """A copy of device tensor `t` on the CPU, outside autograd (every output comes back this way)."""
        return t.detach().to("cpu") if t.requires_grad else t.to("cpu")

    def empty_cache(self) -> None:
        mod = self._torch_module()
        if mod is not None and hasattr(mod, "empty_cache"):
            mod.empty_cache()

    @contextlib.contextmanager
    def track_fallbacks(self) -> Iterator[FallbackTracker]:
        """Record ops that run through the CPU fallback while the block runs.

        The generic way reads the warnings real backends emit; adapters with
        counters override this.
        """
        tracker = FallbackTracker()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                yield tracker
            finally:
                for w in caught:
                    op = fallback_op_from_warning(str(w.message))
                    if op:
                        tracker.add(op)

    def dtype_supported(self, dtype_name: str) -> bool:
        return dtype_name not in self.never_supported_dtypes

    def coverage_profile(self) -> Any:
        """The sim profile in force (op_db.sim_profile.SimProfile), whose unsupported and fallback
        ops change what the device really offers beyond its registrations; None for a real backend."""
        return None

    def describe(self) -> dict[str, Any]:
        available = self.is_available()
        return {
            "name": self.name,
            "device_type": self.device_type,
            "available": available,
            "device_count": self.device_count() if available else 0,
            "versions": self.versions() if available else {},
            "dispatch_key": self.dispatch_key,
            "compile_backend": self.compile_backend,
            "simulated": self.simulated,
        }


def fallback_op_from_warning(text: str) -> str | None:
    """Extract 'aten.median.default' from a backend's CPU-fallback warning, if it is one."""
    lowered = text.lower()
    if not any(marker in lowered for marker in FALLBACK_WARNING_MARKERS):
        return None
    import re

    match = re.search(r"aten::([A-Za-z0-9_]+)(?:\.([A-Za-z0-9_]+))?", text)
    if not match:
        return "unknown"
    name, overload = match.group(1), match.group(2) or "default"
    return f"aten.{name}.{overload}"
