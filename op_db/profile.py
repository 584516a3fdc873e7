"""Coverage profiles: turn a measured run into a `sim` profile.

A model author can then dry-run a port against what a real backend measured:
`neuron-check profile export --run 7 -o neuron.json` on the nightly database,
then `neuron-check model.py --device sim --sim-profile neuron.json`.

The profile holds only what the run measured (DESIGN.md, "The `sim` device"):

* unsupported_ops: `failing_op` of every UNSUPPORTED item;
* fallback_ops: every op a result lists in `fallback_ops`;
* unsupported_dtypes: dtypes whose every judged item is UNSUPPORTED
  (SKIP and REF_ERROR items say nothing about the backend and are ignored).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from op_db.errors import InputError
from op_db.records import Result, Status
from op_db.sim_profile import dtype_names, is_op_pattern, known_op_names, load_profile

_NEUTRAL = {Status.SKIP, Status.REF_ERROR}


def profile_from_results(results: list[Result], name: str) -> dict[str, Any]:
    unsupported = {r.failing_op for r in results if r.status == Status.UNSUPPORTED and r.failing_op}
    fallback = {op for r in results for op in r.fallback_ops}
    by_dtype: dict[str, set[Status]] = defaultdict(set)
    for r in results:
        if r.status not in _NEUTRAL:
            by_dtype[r.dtype].add(r.status)
    dtypes = sorted(d for d, statuses in by_dtype.items() if statuses == {Status.UNSUPPORTED} and d in dtype_names())
    profile = {
        "name": name,
        "unsupported_ops": sorted(op for op in unsupported if _exact_op(op)),
        "fallback_ops": sorted(op for op in fallback - unsupported if _exact_op(op)),
        "unsupported_dtypes": dtypes,
    }
    load_profile(profile)  # the export is a profile by the one schema (op_db/sim_profile.py)
    return profile


def _exact_op(name: str) -> bool:
    """A measured op name the schema accepts, taken literally (a '*' in it would glob): an overload
    this torch has (a custom op whose library is not loaded here could not be simulated anyway)."""
    return is_op_pattern(name) and "*" not in name and name in known_op_names()


def export_profile(store: Any, run_spec: str | int | None, path: str | Path | None = None) -> dict[str, Any]:
    """The sim profile of a stored run; written as JSON to `path` when given."""
    run_id = store.resolve_run(run_spec)
    run = store.run(run_id)
    name = f"measured: run {run_id} on {run['device']} ({run['backend']}"
    name += f" {run['backend_version']})" if run.get("backend_version") else ")"
    if run.get("simulated"):
        name += " [simulated]"
    profile = profile_from_results(store.results(run_id), name)
    if path is not None:
        try:
            Path(path).write_text(json.dumps(profile, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write {path}: {exc.strerror}.") from None
    return profile
