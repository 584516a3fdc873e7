"""Build status of many model types, in worker processes.

Keeping every modeling module imported costs gigabytes (about 3.6 GB for all
of them), so types are built in batches, each in a fresh spawned process that
exits afterwards: memory stays at one batch's worth.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Sequence

BATCH = 24
OK = "ok"


def _build_batch(model_types: Sequence[str]) -> list[tuple[str, str, float]]:
    import transformers

    from conformance.models import zoo

    transformers.logging.set_verbosity_error()
    entries = zoo.catalogue()
    rows = []
    for model_type in model_types:
        start = time.perf_counter()
        try:
            zoo.build_model(entries[model_type])
            status = OK
        except zoo.BuildError as exc:
            status = f"build failed: {exc}"
        except Exception as exc:  # noqa: BLE001 - import errors of a modeling module, say
            status = f"build failed: {type(exc).__name__}: {str(exc).strip()[:300]}"
        rows.append((model_type, status, time.perf_counter() - start))
    return rows


def build_status(model_types: Sequence[str], jobs: int = 1, batch: int = BATCH,
                 on_batch: Callable[[int], None] | None = None) -> dict[str, tuple[str, float]]:
    """model_type -> (OK or "build failed: ...", seconds), built in `jobs` processes."""
    batches = [list(model_types[i:i + batch]) for i in range(0, len(model_types), batch)]
    found: dict[str, tuple[str, float]] = {}
    if not batches:
        return found
    mp = multiprocessing.get_context("spawn")
    with mp.Pool(processes=max(1, min(jobs, len(batches))), maxtasksperchild=1) as pool:
        for rows in pool.imap_unordered(_build_batch, batches):
            for model_type, status, seconds in rows:
                found[model_type] = (status, seconds)
            if on_batch is not None:
                on_batch(len(rows))
    return {t: found[t] for t in model_types if t in found}
