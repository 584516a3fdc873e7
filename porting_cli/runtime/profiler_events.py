"""torch.profiler events -> op-event rows attributed to user lines (porting_cli/runtime/profiler_sites.py).

Each row is one profiler event that is an op (aten ops, autograd nodes, backend ops; not our own
``nc|N`` ranges and not ``ProfilerStep#N``), so the rows' self times add up to the profiler's
own total. Its line is, in order: the ``nc|N`` range it is nested in (forward); the forward op
with the same autograd sequence number (backward, on the engine's thread); the backward() call
whose range it falls in; none ("no user line").
"""

from __future__ import annotations

import json
import re
from typing import Any

from porting_cli.runtime.profiler_sites import RANGE_PREFIX

_US = 1e-6


def _site_range(event: Any) -> Any:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith(RANGE_PREFIX):
            return parent
        parent = parent.cpu_parent
    return None


def _backward_node(event: Any) -> Any:
    node = event
    while node is not None:
        if node.sequence_nr >= 0 and node.name.startswith("autograd::engine::evaluate_function"):
            return node
        node = node.cpu_parent
    return None


def is_op(name: str) -> bool:
    """An op event: namespaced (aten::, autograd::, a backend's ops) or an autograd node; not our
    ranges, ProfilerStep, nor record_function annotations such as Optimizer.step#SGD.step."""
    if name.startswith(RANGE_PREFIX):
        return False
    return "::" in name or re.search(r"Backward\d*$", name) is not None


def event_rows(events: list[Any], sites: list[dict[str, Any]], fallbacks: set[str],
               device_timed: bool, first_step: int = 1) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(op rows, range rows) of one profiled window. `fallbacks`: 'aten::median' style names of ops
    the backend ran through its CPU fallback; `device_timed`: the backend has its own profiler
    activity (device time = the events' device time; else their self CPU time)."""
    marks = sorted((e for e in events if e.name.startswith("ProfilerStep")), key=lambda e: e.time_range.start)
    steps = [(e.time_range.start, e.time_range.end, first_step + i) for i, e in enumerate(marks)]
    ranges = [e for e in events if e.name.startswith(RANGE_PREFIX)]
    backward_ranges = [e for e in ranges if sites[int(e.name[3:])]["call"] == "backward"]
    forward: dict[tuple[int, int], int] = {}
    placed: list[tuple[Any, Any, int | None, str]] = []
    for e in events:
        if not is_op(e.name):
            continue
        owner = _site_range(e)
        index = int(owner.name[len(RANGE_PREFIX):]) if owner is not None else None
        if index is not None and e.sequence_nr >= 0:
            forward.setdefault((e.thread, e.sequence_nr), index)
        placed.append((e, owner, index, "forward"))
    copy_paid: set[int] = set()
    rows = []
    for e, owner, index, phase in placed:
        if index is None:
            node = _backward_node(e)
            if node is not None:
                index, phase = forward.get((node.fwd_thread, node.sequence_nr)), "backward"
            if index is None:
                index = _containing(backward_ranges, e)
                phase = "backward" if index is not None else phase
        site = sites[index] if index is not None else {"site": None, "kind": "", "bytes": 0, "call": ""}
        file, line = split_site(site["site"])
        top = e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")
        copy_bytes = 0
        if site["kind"] and owner is not None and id(owner) not in copy_paid and e.cpu_parent is owner:
            copy_bytes = site["bytes"]  # once per call: on its first op
            copy_paid.add(id(owner))
        self_cpu = e.self_cpu_time_total * _US
        device = (e.self_device_time_total * _US) if device_timed else self_cpu
        rows.append({
            "step": _step_of(steps, e.time_range.start), "file": file, "line": line,
            "function": site["call"], "op": e.name, "phase": phase, "top_level": bool(top),
            "shapes": json.dumps(e.input_shapes or []), "dtypes": json.dumps(getattr(e, "input_dtypes", None) or []),
            "device_time_s": device, "cpu_time_s": self_cpu, "cpu_total_s": e.cpu_time_total * _US,
            "fallback": e.name in fallbacks, "copy_bytes": copy_bytes, "kind": site["kind"],
            "thread": int(e.thread), "sequence_nr": int(e.sequence_nr), "site_index": index,
        })
    range_rows = []
    for e in ranges:
        site = sites[int(e.name[3:])]
        file, line = split_site(site["site"])
        range_rows.append({"file": file, "line": line, "kind": site["kind"], "bytes": site["bytes"],
                           "call": site["call"], "total_s": e.cpu_time_total * _US,
                           "step": _step_of(steps, e.time_range.start), "chain": site["chain"]})
    return rows, range_rows


def _containing(ranges: list[Any], event: Any) -> int | None:
    start = event.time_range.start
    for r in ranges:
        if r.time_range.start <= start <= r.time_range.end:
            return int(r.name[3:])
    return None


def _step_of(steps: list[tuple[float, float, int]], at: float) -> int | None:
    for start, end, n in steps:
        if start <= at <= end:
            return n
    return None


def split_site(site: str | None) -> tuple[str, int]:
    if not site:
        return "(no user line)", 0
    file, _, line = site.rpartition(":")
    return file, int(line)
