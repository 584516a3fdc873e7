"""Build status of many model types, in worker processes.

Keeping every modeling module imported costs gigabytes (about 3.6 GB for all
of them), so types are built in batches, each in a fresh spawned process that
exits afterwards: memory stays at one batch's worth.
"""

from __future__ import annotations

import functools
import multiprocessing
import time
from collections.abc import Callable, Sequence

from conformance.lifeline import die_with_parent

BATCH = 24
OK = "ok"


def _forward(entry, model) -> None:
    """One fp32 forward on CPU with the suite's inputs: a type that builds but cannot run is no use."""
    import torch

    from conformance.models.inputs import make_inputs

    with torch.no_grad():
        model(**make_inputs(entry.task, model.config, 0, model=model))


def _build_batch(model_types: Sequence[str], forward: bool = True) -> list[tuple[str, str, float]]:
    import transformers

    from conformance.models import zoo

    transformers.logging.set_verbosity_error()
    entries = zoo.catalogue()
    rows = []
    for model_type in model_types:
        start = time.perf_counter()
        try:
            model = zoo.build_model(entries[model_type])
        except zoo.BuildError as exc:
            status = f"build failed: {exc}"
        except Exception as exc:  # noqa: BLE001 - import errors of a modeling module, say
            status = f"build failed: {type(exc).__name__}: {str(exc).strip()[:300]}"
        else:
            status = OK
            if forward:
                try:
                    _forward(entries[model_type], model)
                except Exception as exc:  # noqa: BLE001 - the forward's failure is this type's status
                    status = f"forward failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            del model
        rows.append((model_type, status, time.perf_counter() - start))
    return rows


def build_status(model_types: Sequence[str], jobs: int = 1, batch: int = BATCH,
                 on_batch: Callable[[int], None] | None = None,
                 forward: bool = True) -> dict[str, tuple[str, float]]:
    """model_type -> (OK, "build failed: ..." or "forward failed: ...", seconds), built in
    `jobs` processes; with `forward`, each built model also runs one fp32 forward on CPU."""
    batches = [list(model_types[i:i + batch]) for i in range(0, len(model_types), batch)]
    found: dict[str, tuple[str, float]] = {}
    if not batches:
        return found
    mp = multiprocessing.get_context("spawn")
    with mp.Pool(processes=max(1, min(jobs, len(batches))), maxtasksperchild=1,
                 initializer=die_with_parent) as pool:
        for rows in pool.imap_unordered(functools.partial(_build_batch, forward=forward), batches):
            for model_type, status, seconds in rows:
                found[model_type] = (status, seconds)
            if on_batch is not None:
                on_batch(len(rows))
    return {t: found[t] for t in model_types if t in found}
