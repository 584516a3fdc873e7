"""Merge shard stores from a CI matrix into one run per original run.

Runs are grouped by their *run key*:

* `options["run_group"]` when the run recorded one (the `ops`/`models`
  commands store it; CI sets it, e.g. to the pipeline id, so all shards of one
  pipeline share it); otherwise
* the derived key: backend, device, simulated, torch and backend versions, git
  revision, the command line without `--shard ...`, and the options without
  `shard` and `jobs`.

All runs of one key become one run in the output: its results are the union
(an item found in two shards keeps the later shard's row), its coverage the
union, `started` the earliest, `finished` the latest, and `options` gain
`shards` (the shard specs seen) and `merged_from` (file#id of each source).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from op_db.errors import InputError
from op_db.store import Store, open_for_reading

SHARD_OPTION = "--shard"
# Options that may differ between shards of one run: the shard itself, and the
# worker count (parallelism changes no result).
_PER_SHARD_OPTIONS = ("shard", "run_group", "jobs")


def strip_shard(command: str | None) -> str:
    """The command line without `--shard X` / `--shard=X`."""
    if not command:
        return ""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
            continue
        if word == SHARD_OPTION:
            skip = True
            continue
        if word.startswith(SHARD_OPTION + "="):
            continue
        kept.append(word)
    return shlex.join(kept)


def run_key(run: dict[str, Any]) -> tuple:
    options = run.get("options") or {}
    if options.get("run_group"):
        return ("run_group", str(options["run_group"]))
    shared = {k: v for k, v in options.items() if k not in _PER_SHARD_OPTIONS}
    return (
        "derived", run.get("backend"), run.get("device"), bool(run.get("simulated")),
        run.get("torch_version"), run.get("backend_version"), run.get("git_revision"),
        strip_shard(run.get("command")), json.dumps(shared, sort_keys=True, default=str),
    )


def merge_stores(inputs: list[str | Path], output: str | Path) -> list[dict[str, Any]]:
    """Merge every run of `inputs` into `output`; return one summary per merged run."""
    output = Path(output)
    resolved_out = output.resolve()
    if not inputs:
        raise InputError("give at least one database to merge.")
    for path in inputs:
        if Path(path).resolve() == resolved_out:
            raise InputError(f"the output {output} is also an input; write the merge to a new file.")
    # Read every input fully before writing, so a bad input stops the merge before OUT changes.
    groups: dict[tuple, list[tuple[str, dict[str, Any], list, list]]] = {}
    for path in inputs:
        with open_for_reading(path) as store:
            for run in store.runs():
                groups.setdefault(run_key(run), []).append(
                    (str(path), run, store.results(run["id"]), store.coverage(run["id"]))
                )
    merged = []
    with Store.open(output) as out:
        for parts in groups.values():
            row, results, coverage, duplicates = _combine(parts)
            run_id = out.import_run(row, results, coverage)
            merged.append({"id": run_id, "shards": len(parts), "results": len(results),
                           "duplicate_items": duplicates, "sources": row["options"]["merged_from"]})
    return merged


def _combine(parts: list[tuple[str, dict[str, Any], list, list]]):
    first = parts[0][1]
    row = {k: v for k, v in first.items() if k not in ("id", "counts")}
    starts = [run["started"] for _, run, _, _ in parts if run.get("started")]
    ends = [run.get("finished") for _, run, _, _ in parts]
    statuses = {run.get("status") for _, run, _, _ in parts}
    row["started"] = min(starts) if starts else first.get("started")
    row["finished"] = max(ends) if all(ends) else None
    row["status"] = statuses.pop() if len(statuses) == 1 else "incomplete"
    row["simulated"] = any(run.get("simulated") for _, run, _, _ in parts)
    options = {k: v for k, v in (first.get("options") or {}).items() if k != "shard"}
    options["shards"] = [run.get("options", {}).get("shard") for _, run, _, _ in parts]
    options["merged_from"] = [f"{path}#{run['id']}" for path, run, _, _ in parts]
    row["options"] = options
    by_item, coverage, duplicates = {}, {}, 0
    for _, _, results, cov in parts:
        for result in results:
            duplicates += result.item in by_item
            by_item[result.item] = result
        coverage.update(dict(cov))
    return row, list(by_item.values()), sorted(coverage.items()), duplicates
