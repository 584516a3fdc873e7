"""Merge shard stores from a CI matrix into one run per original run.

Runs are grouped by their *run key*:

* `options["run_group"]` when the run recorded one (the `ops`/`models`
  commands store it; CI sets it, e.g. to the pipeline id, so all shards of one
  pipeline share it); otherwise
* the derived key: backend, device, simulated, the torch, backend and
  Transformers versions, the git revision, the shard count N, and the
  recorded options without the per-shard ones (`shard`, `jobs`).

The recorded options are the run's command line normalised: every option that
shapes the results, parsed, with defaults filled in. The raw command line is
not compared, because it also holds what rightly differs per shard (`--db`,
`--junit`, `-o`, the option spelling and order). A run that recorded no
options was not made by a suite command and is keyed by its command line.

Under the derived key only shards join: an unsharded run stays a run of its
own, and a shard spec seen twice starts a new run (the same nightly command
on two days is two runs, not one). Under a run group every run of the label
joins (a retried shard replaces the first attempt's items).

All runs of one group become one run in the output: its results are the union
(an item found in two shards keeps the later shard's row), its coverage the
union, `started` the earliest, `finished` the latest, and `options` gain
`shards` (the shard specs seen) and `merged_from` (file#id of each source).
Its status is the shards' common status; it is `incomplete` when they differ,
when a shard was still live or abandoned, or when shards of the N are missing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from op_db.errors import InputError
from op_db.ownership import ABANDONED, RUNNING
from op_db.store import OWNER_FIELDS, Store, check_writable_store, open_for_reading

# Options that may differ between the shards of one run: the shard itself, the
# worker count (parallelism changes no result), and the group label.
PER_SHARD_OPTIONS = frozenset({"shard", "jobs", "run_group"})
INCOMPLETE = "incomplete"
# The advice in a database error: merge names its files as arguments and -o, never --db.
OTHER_INPUT = "name another input"
OTHER_OUTPUT = "give -o another file"

Part = tuple[str, dict[str, Any], list, list]  # (source file, run row, results, coverage)


def shard_spec(run: dict[str, Any]) -> tuple[int, int] | None:
    """The run's `--shard K/N` as numbers; None for an unsharded run or an unreadable spec."""
    text = str((run.get("options") or {}).get("shard") or "")
    k, sep, n = text.partition("/")
    if not sep or not k.strip().isdigit() or not n.strip().isdigit():
        return None
    return int(k), int(n)


def run_key(run: dict[str, Any]) -> tuple:
    options = run.get("options") or {}
    if options.get("run_group"):
        return ("run_group", str(options["run_group"]))
    shared = {k: v for k, v in options.items() if k not in PER_SHARD_OPTIONS}
    spec = shard_spec(run)
    return (
        "derived", run.get("backend"), run.get("device"), bool(run.get("simulated")),
        run.get("torch_version"), run.get("backend_version"), run.get("transformers_version"),
        run.get("git_revision"), spec[1] if spec else None,
        json.dumps(shared, sort_keys=True, default=str) if options else ("command", run.get("command") or ""),
    )


def group_runs(parts: list[Part]) -> list[list[Part]]:
    """Parts (in input order) grouped into the runs they belong to (see the module doc)."""
    groups: list[list[Part]] = []
    open_groups: dict[tuple, list[list[Part]]] = {}
    for part in parts:
        run = part[1]
        key = run_key(run)
        spec = shard_spec(run)
        if key[0] == "derived" and spec is None:
            groups.append([part])
            continue
        candidates = open_groups.setdefault(key, [])
        target = next((group for group in candidates
                       if key[0] == "run_group" or spec not in {shard_spec(p[1]) for p in group}), None)
        if target is None:
            target = []
            candidates.append(target)
            groups.append(target)
        target.append(part)
    return groups


def merge_stores(inputs: list[str | Path], output: str | Path) -> list[dict[str, Any]]:
    """Merge every run of `inputs` into `output`; return one summary per merged run."""
    output = Path(output)
    resolved_out = output.resolve()
    if not inputs:
        raise InputError("give at least one database to merge.")
    for path in inputs:
        if Path(path).resolve() == resolved_out:
            raise InputError(f"the output {output} is also an input; write the merge to a new file.")
    check_writable_store(output, OTHER_OUTPUT)  # a bad output stops the merge before any input is read
    # Read every input fully before writing, so a bad input stops the merge before OUT changes.
    parts: list[Part] = []
    for path in inputs:
        with open_for_reading(path, OTHER_INPUT) as store:
            for run in store.runs():
                parts.append((str(path), run, store.results(run["id"]), store.coverage(run["id"])))
    merged = []
    with Store.open(output, other=OTHER_OUTPUT) as out:
        for group in group_runs(parts):
            row, results, coverage, duplicates = _combine(group)
            run_id = out.import_run(row, results, coverage)
            merged.append({"id": run_id, "shards": len(group), "results": len(results),
                           "duplicate_items": duplicates, "sources": row["options"]["merged_from"],
                           "status": row["status"]})
    return merged


def _combine(parts: list[Part]):
    first = parts[0][1]
    row = {k: v for k, v in first.items() if k not in ("id", "counts", *OWNER_FIELDS)}
    starts = [run["started"] for _, run, _, _ in parts if run.get("started")]
    ends = [run.get("finished") for _, run, _, _ in parts]
    statuses = {run.get("status") for _, run, _, _ in parts}
    row["started"] = min(starts) if starts else first.get("started")
    row["finished"] = max(ends) if all(ends) else None
    row["status"] = _merged_status(statuses, [shard_spec(run) for _, run, _, _ in parts])
    beats = [run["heartbeat"] for _, run, _, _ in parts if run.get("heartbeat")]
    row["heartbeat"] = max(beats) if beats else None
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


def _merged_status(statuses: set[str], specs: list[tuple[int, int] | None]) -> str:
    """The shards' common status; `incomplete` when they differ, a shard is not over, or shards are missing."""
    if len(statuses) != 1 or statuses & {RUNNING, ABANDONED}:
        return INCOMPLETE
    counts = {spec[1] for spec in specs if spec}
    if len(counts) == 1 and len({spec for spec in specs if spec}) < counts.pop():
        return INCOMPLETE
    return next(iter(statuses))
