"""The built-in backend adapters."""

from __future__ import annotations

import os
from typing import Any

from conformance.backends.base import BackendAdapter, FallbackTracker


class NeuronAdapter(BackendAdapter):
    """AWS Trainium through TorchNeuron (PrivateUse1, device string `neuron`)."""

    name = device_type = "neuron"
    dispatch_key = "PrivateUse1"
    compile_backend = "neuron"
    module = "torch_neuronx"
    package = "torch-neuronx"
    never_supported_dtypes = frozenset({"float64", "complex128"})


class CudaAdapter(BackendAdapter):
    name = device_type = "cuda"
    dispatch_key = "CUDA"


class XpuAdapter(BackendAdapter):
    name = device_type = "xpu"
    dispatch_key = "XPU"


class MpsAdapter(BackendAdapter):
    name = device_type = "mps"
    dispatch_key = "MPS"
    never_supported_dtypes = frozenset({"float64", "complex128"})


class HpuAdapter(BackendAdapter):
    name = device_type = "hpu"
    dispatch_key = "HPU"
    compile_backend = "hpu_backend"
    module = "habana_frameworks.torch"
    package = "habana-torch-plugin"


class NpuAdapter(BackendAdapter):
    name = device_type = "npu"
    dispatch_key = "PrivateUse1"
    compile_backend = "npu"
    module = "torch_npu"
    package = "torch-npu"


class AlwaysThereAdapter(BackendAdapter):
    """Devices that exist in every torch build."""

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def synchronize(self) -> None:
        pass

    def empty_cache(self) -> None:
        pass


class CpuAdapter(AlwaysThereAdapter):
    """The CPU itself; meaningful with `--mode compile` (Inductor vs eager CPU)."""

    name = device_type = "cpu"
    dispatch_key = "CPU"


class MetaAdapter(AlwaysThereAdapter):
    """Shape and dtype propagation only: values are never compared."""

    name = device_type = "meta"
    dispatch_key = "Meta"
    compile_backend = "aot_eager"


class PrivateUseOneAdapter(BackendAdapter):
    """Whatever backend is registered as PrivateUse1 under its own name.

    The module that registers it is named by NEURON_CHECK_PRIVATEUSE1_MODULE.
    """

    name = "privateuseone"
    dispatch_key = "PrivateUse1"
    compile_backend = None  # unknown: name one with --compile-backend

    def __init__(self) -> None:
        super().__init__()
        self.module = os.environ.get("NEURON_CHECK_PRIVATEUSE1_MODULE") or None

    @property
    def device_type(self) -> str:  # type: ignore[override]
        import torch

        return torch._C._get_privateuse1_backend_name()

    def is_available(self) -> bool:
        try:
            self._import_module()
        except Exception:
            return False
        if self.device_type == "privateuseone":
            return False
        return super().is_available()


class SimAdapter(BackendAdapter):
    """The embedded CPU-backed stand-in device (conformance/sim)."""

    name = device_type = "sim"
    dispatch_key = "PrivateUse1"
    compile_backend = "sim"  # conformance/sim/compiler.py, registered when the adapter starts
    module = "conformance.sim"
    simulated = True

    def __init__(self, profile: Any = None) -> None:
        super().__init__()
        self.profile = profile

    def _import_module(self) -> Any:
        import conformance.sim as sim

        sim.register()
        return sim

    def init(self) -> "SimAdapter":
        sim = self._import_module()
        if self.profile is not None:
            sim.set_profile(sim.load_profile(self.profile))
        self._initialised = True
        return self

    def versions(self) -> dict[str, str]:
        found = super().versions()
        import conformance.sim as sim

        profile = sim.active_profile()
        found["sim-profile"] = profile.name if profile is not None else "fault-free"
        return found

    def dtype_supported(self, dtype_name: str) -> bool:
        profile = self.coverage_profile()
        return profile is None or dtype_name not in profile.unsupported_dtypes

    def coverage_profile(self) -> Any:
        import conformance.sim as sim

        return sim.active_profile()

    def track_fallbacks(self) -> "_SimFallbacks":
        import conformance.sim as sim

        return _SimFallbacks(sim)


class _SimFallbacks:
    """The sim's fallback counter as a tracker: entered once per sample, so a plain class
    rather than a generator-based context manager, given the sim package once."""

    def __init__(self, sim: Any):
        self.sim = sim

    def __enter__(self) -> FallbackTracker:
        self.tracker = FallbackTracker()
        self.sim.reset_fallback_log()
        return self.tracker

    def __exit__(self, *exc: Any) -> None:
        for op in self.sim.fallback_log():
            self.tracker.add(op)


BUILTIN: dict[str, type[BackendAdapter]] = {
    cls.name: cls
    for cls in (
        NeuronAdapter, CudaAdapter, XpuAdapter, MpsAdapter, HpuAdapter, NpuAdapter,
        MetaAdapter, CpuAdapter, PrivateUseOneAdapter, SimAdapter,
    )
}

