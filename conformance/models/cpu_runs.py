"""The model suite's CPU runs: a model copied to a device and dtype, the float64 oracle's copy, and
one variant run on the CPU with the item's seed, whose failure is the reference's (RefFailure).
Shared by the runner and the flex-paths check."""

from __future__ import annotations

import copy


class RefFailure(Exception):
    """The CPU reference (or the float64 oracle) raised; wraps the original."""


def copy_model(model, device, dtype):
    from conformance.models.dtype_plan import cast_model

    return cast_model(copy.deepcopy(model), device, dtype)


def oracle_copy(base):
    """The float64 copy; grouped-matmul MoE kernels have no float64, so its experts run eagerly."""
    import torch

    model = copy_model(base, "cpu", torch.float64)
    if hasattr(model, "set_experts_implementation") and getattr(model.config, "_experts_implementation", None):
        try:
            model.set_experts_implementation("eager")
        except Exception:  # noqa: BLE001 - models without experts refuse; nothing to change
            pass
    return model


def on_cpu(run, model, inputs, dtype, seed):
    from conformance.models.inputs import cast_inputs
    from conformance.models.randomness import reseed

    try:
        reseed(seed)
        return run(model, cast_inputs(inputs, "cpu", dtype))
    except Exception as exc:  # noqa: BLE001
        raise RefFailure(f"{type(exc).__name__}: {str(exc).strip()}") from exc
