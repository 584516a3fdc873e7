"""Which processes a process started, and which of them still run (Linux /proc).

For the checks that a killed run leaves nothing behind (tests/conformance/test_engine_signals.py,
benchmarks/chaos.py). A process is named by its pid and start time, so a pid the kernel
reuses for a new process is not mistaken for the old one; a zombie counts as gone.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

PROC = Path("/proc")


@dataclasses.dataclass(frozen=True)
class Proc:
    pid: int
    started: int  # clock ticks after boot (field 22 of /proc/PID/stat)


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of `pid`, None when it does not exist."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = text[text.rindex(")") + 2:].split()  # the name in parentheses may hold spaces
    return fields[0], int(fields[1]), int(fields[19])


def descendants(pid: int) -> set[Proc]:
    """Every live process below `pid`: children, their children, and so on."""
    parents: dict[int, list[Proc]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            found = _stat(int(entry.name))
            if found and found[0] not in "ZX":
                parents.setdefault(found[1], []).append(Proc(int(entry.name), found[2]))
    found_below: set[Proc] = set()
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found_below:
                found_below.add(child)
                todo.append(child.pid)
    return found_below


def alive(procs: set[Proc]) -> set[Proc]:
    """Those of `procs` still running (not exited, not a zombie, pid not reused)."""
    running = set()
    for proc in procs:
        found = _stat(proc.pid)
        if found and found[0] not in "ZX" and found[2] == proc.started:
            running.add(proc)
    return running
