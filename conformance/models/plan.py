"""Plan the model suite: command-line choices -> WorkItems ("model", model_type, variant, dtype, mode)."""

from __future__ import annotations

from op_db.errors import InputError
from op_db.records import WorkItem

MODEL_DTYPES = ("float32", "bfloat16", "float16")  # what --dtype may name for models
DEFAULT_DTYPES = ("float32", "bfloat16")
MODES = ("eager", "compile")


def model_dtypes(names: list[str] | None) -> list[str]:
    """['fp32', 'bf16'] -> ['float32', 'bfloat16']; only the dtypes a model runs in."""
    from conformance.planning import parse_dtypes

    if not names:
        return list(DEFAULT_DTYPES)
    found = parse_dtypes(names)
    for name in found:
        if name not in MODEL_DTYPES:
            raise InputError(f"models run in fp32, bf16 or fp16, not {name}.")
    return found


def plan(
    archs: list[str] | None = None,
    tasks: list[str] | None = None,
    dtypes: list[str] | None = None,
    modes: list[str] | None = None,
    grad: bool = False,
    generate: bool = False,
) -> list[WorkItem]:
    """Forward items for every selected model type, plus backward (--grad) and generate
    (--generate, generative tasks only), in model-type order."""
    from conformance.models import zoo

    modes = modes or ["eager"]
    for mode in modes:
        if mode not in MODES:
            raise InputError(f"unknown mode {mode!r}; use eager or compile.")
    entries = zoo.select(archs, tasks)
    dtype_names = model_dtypes(dtypes)
    items = []
    for entry in entries:
        variants = ["forward"] + (["backward"] if grad else [])
        if generate and entry.task in zoo.GENERATIVE_TASKS:
            variants.append("generate")
        for variant in variants:
            for dtype in dtype_names:
                for mode in modes:
                    items.append(WorkItem("model", entry.model_type, variant, dtype, mode))
    return items
