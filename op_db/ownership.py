"""Who owns a running run, and whether that owner is still there.

A run records its owner (host, pid, the process's start time) and a heartbeat
the owner refreshes while the run is live. A run marked `running` whose owner
is gone is `abandoned`:

* on the owner's own host the process table decides: the pid is dead (or a
  zombie), or it now belongs to a process that started at another time (the
  pid was reused);
* from any other host, or for a run that recorded no owner (written before
  owners were recorded), only the heartbeat can tell: older than
  `LIVENESS.stale_after_s` means gone.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

RUNNING = "running"
ABANDONED = "abandoned"


@dataclass(frozen=True)
class Liveness:
    """How often a live run beats, and when silence means its owner is gone."""

    heartbeat_interval_s: float = 30.0
    # Ten missed beats: generous enough for a loaded machine or a slow commit.
    stale_after_s: float = 300.0
    # /proc/stat's boot time is recomputed on every read and may drift by a
    # second; a pid reused within this window of the original start is not caught.
    start_tolerance_s: float = 2.0


LIVENESS = Liveness()


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    started: float | None  # the process's start, seconds since the epoch; None where unknown


def current_owner() -> Owner:
    pid = os.getpid()
    return Owner(host=platform.node(), pid=pid, started=process_start_time(pid))


def process_start_time(pid: int) -> float | None:
    """When process `pid` started (epoch seconds), from /proc; None off Linux or for no such pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(line for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
    except (OSError, StopIteration):
        return None
    # The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    ticks = int(fields[19])  # field 22, starttime, in clock ticks since boot
    return int(boot.split()[1]) + ticks / os.sysconf("SC_CLK_TCK")


def pid_alive(pid: int) -> bool:
    """Whether `pid` is a live (not zombie) process on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    except OverflowError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: trust the signal check
    return stat[stat.rindex(")") + 2:].split()[0] not in ("Z", "X")


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return _dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def owner_alive(owner: Owner | None, heartbeat: float | None, *, now: float,
                here: str | None = None, liveness: Liveness = LIVENESS) -> bool:
    """Whether the process that owns a run is still there (see the module doc)."""
    here = here if here is not None else platform.node()
    if owner is not None and owner.host == here and owner.pid:
        if not pid_alive(owner.pid):
            return False
        started = process_start_time(owner.pid)
        if owner.started is None or started is None:
            return True
        return abs(started - owner.started) <= liveness.start_tolerance_s
    if heartbeat is None:
        return False
    return now - heartbeat <= liveness.stale_after_s


def effective_status(row: dict, *, now: float) -> str:
    """The status to show for a run row: `abandoned` for a `running` run whose owner is gone."""
    if row.get("status") != RUNNING:
        return row.get("status")
    return RUNNING if owner_alive(row_owner(row), parse_time(row.get("heartbeat")), now=now) else ABANDONED


def row_owner(row: dict) -> Owner | None:
    if not row.get("owner_pid"):
        return None
    return Owner(host=row.get("owner_host") or "", pid=int(row["owner_pid"]), started=row.get("owner_started"))


class Heartbeat:
    """A daemon thread calling `beat()` every `interval_s` until stopped.

    Results refresh the heartbeat as they are committed; this covers the long
    silences in between (an item may run for minutes).
    """

    def __init__(self, beat: Callable[[], None], interval_s: float = LIVENESS.heartbeat_interval_s):
        self._beat = beat
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="neuron-check-heartbeat", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._beat()

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
