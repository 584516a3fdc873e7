"""Nightly series: which runs are points of one trend, and what "missing" means between two.

A series is defined by backend, device, the suites a run ran and its
selection: the options that choose items (`--ops`, `--exclude`, `--arch`,
`--task`, `--dtype`, `--mode`, `--grad`, `--generate`; a run merged from all
shards of a plan counts as the unsharded plan). `--series NAME` (stored in
the run's options as `series`) names a series explicitly instead, for
backend and device. So `--ops mul --dtype bf16` after a full nightly is a
series of its own, never a 0% point of the nightly.

Between two runs of a series, an item of the earlier run that the later one
lacks is *not run* when the later run did not select it (another selection
under one `--series` name) or did not finish, and *vanished* otherwise.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import zlib
from typing import Any

from op_db.records import WorkItem
from reports.claims_table import DTYPE_ALIASES

# Run options that choose items, by how they are compared.
_PATTERN_OPTIONS = ("ops", "exclude", "archs", "tasks")
_SET_OPTIONS = ("dtypes", "modes")
_SCALAR_OPTIONS = ("mode", "grad", "generate")
FINISHED = "finished"


@dataclasses.dataclass(frozen=True)
class SeriesKey:
    backend: str
    device: str
    suites: str  # e.g. "opinfo", "fp8+opinfo", "model"
    selection: str  # "" for every item; else e.g. "dtypes=bfloat16 ops=mul"
    name: str | None = None  # --series NAME

    @property
    def label(self) -> str:
        if self.name:
            return f"{self.name} ({self.backend} / {self.device})"
        parts = [self.backend, self.device, self.suites] + ([self.selection] if self.selection else [])
        return " / ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def canonical_dtype(name: str) -> str:
    name = str(name).strip().lower().removeprefix("torch.")
    return DTYPE_ALIASES.get(name, name)


def selection(options: dict[str, Any]) -> str:
    """The options that choose items, as one stable text ('' when the run chose everything)."""
    parts = []
    for key in _PATTERN_OPTIONS:
        values = sorted(options.get(key) or ())
        if values:
            parts.append(f"{key}={','.join(values)}")
    for key in _SET_OPTIONS:
        values = sorted({canonical_dtype(v) if key == "dtypes" else str(v) for v in options.get(key) or ()})
        if values:
            parts.append(f"{key}={','.join(values)}")
    for key in _SCALAR_OPTIONS:
        value = options.get(key)
        if value not in (None, False, "", "eager"):
            parts.append(f"{key}={value}")
    shards = _shards(options)
    if shards:
        parts.append(f"shard={','.join(shards)}")
    return " ".join(sorted(parts))


def series_key(run: dict[str, Any], suites: str) -> SeriesKey:
    options = run.get("options") or {}
    name = options.get("series") or None
    return SeriesKey(backend=str(run.get("backend")), device=str(run.get("device")),
                     suites="" if name else suites, selection="" if name else selection(options), name=name)


def selects(options: dict[str, Any], item: WorkItem) -> bool | None:
    """Whether a run with `options` chose `item`; None when its options do not say (an older run)."""
    if not options or not any(k in options for k in (*_PATTERN_OPTIONS, *_SET_OPTIONS, "mode")):
        return None
    patterns = options.get("ops") or options.get("archs") or ()
    if patterns and not any(fnmatch.fnmatchcase(item.subject, p) for p in patterns):
        return False
    if any(fnmatch.fnmatchcase(item.subject, p) for p in options.get("exclude") or ()):
        return False
    dtypes = {canonical_dtype(d) for d in options.get("dtypes") or ()}
    if dtypes and item.dtype not in dtypes and not ("fp8" in dtypes and item.dtype.startswith("float8")):
        return False
    modes = set(options.get("modes") or ()) or ({options["mode"]} if options.get("mode") else set())
    if modes and item.mode not in modes:
        return False
    if item.variant == "backward" and options.get("grad") is False:
        return False
    if item.variant == "generate" and options.get("generate") is False:
        return False
    shard = options.get("shard")
    return _in_shard(item, shard) if shard and not options.get("shards") else True


def split_missing(before_run: dict[str, Any], after_run: dict[str, Any],
                  missing: list[Any]) -> tuple[list[Any], list[Any]]:
    """Results of `before_run` absent from `after_run` -> (not_run, vanished)."""
    if after_run.get("status") not in (None, FINISHED):
        return list(missing), []  # interrupted, abandoned or still running: it did not get there
    options = after_run.get("options") or {}
    not_run, vanished = [], []
    for result in missing:
        (not_run if selects(options, result.item) is False else vanished).append(result)
    return not_run, vanished


def _shards(options: dict[str, Any]) -> list[str]:
    """The shards a run covers; [] when it covers the whole plan (unsharded, or every shard merged)."""
    specs = [s for s in (options.get("shards") or [options.get("shard")]) if s]
    if not specs:
        return []
    totals = {s.split("/")[-1] for s in specs}
    if len(totals) == 1:
        total = int(next(iter(totals)))
        if {int(s.split("/")[0]) for s in specs} == set(range(1, total + 1)):
            return []
    return sorted(set(specs))


def _in_shard(item: WorkItem, shard: str) -> bool:
    """The planner's stable split (conformance.planning.in_shard): crc32 of the test id."""
    try:
        k, n = (int(x) for x in shard.split("/"))
    except ValueError:
        return True
    return zlib.crc32(item.test_id.encode()) % n == k - 1
