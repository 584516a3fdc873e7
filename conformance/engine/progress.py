"""Progress on a terminal for work that takes more than a few seconds; silent anywhere else.

Every long command draws the same bar: the engine's items (`ops`, `models`, `dist`, ...), the
zoo census (`models --list --check-build`) and the porting runtime check. It draws only when
its stream is a terminal, so CI logs and pipes get nothing. A ticker redraws it twice a second,
so the elapsed time moves while one long item runs.

The remaining time comes from measured item times, never from a fixed per-item guess nor from
the wall time since start (which counts worker start-up as if every item took that long):
first what the store knows about the same work items from earlier runs (`Estimate.expected`,
their duration_s), then this run's own times as items finish. Where earlier runs timed some
items, this run's ratio of measured to expected time scales the rest; items nobody timed count
as this run's mean item. With nothing measured yet, the bar shows no estimate rather than a guess.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Hashable, Mapping, Sequence
from typing import TextIO

TICK_S = 0.5
BAR_WIDTH = 24
# How far this run's speed may scale the stored times (a cold cache, a loaded machine).
SCALE_LIMITS = (0.1, 10.0)


class Estimate:
    """Remaining seconds of a set of items, from expected and measured item times."""

    def __init__(self, keys: Sequence[Hashable], expected: Mapping[Hashable, float] | None = None,
                 workers: int = 1):
        expected = expected or {}
        self.left: dict[Hashable, float | None] = {key: expected.get(key) for key in keys}
        self.workers = max(1, workers)
        self.measured_s = 0.0       # every finished item
        self.finished = 0
        self.timed_measured_s = 0.0  # finished items that had an expectation...
        self.timed_expected_s = 0.0  # ...and what was expected of them

    def finish(self, key: Hashable, seconds: float | None) -> None:
        expected = self.left.pop(key, None)
        if seconds is None:
            return
        self.measured_s += seconds
        self.finished += 1
        if expected is not None:
            self.timed_measured_s += seconds
            self.timed_expected_s += expected

    def remaining_s(self) -> float | None:
        """Seconds left with `workers` items running at once; None when nothing is known yet."""
        known = [s for s in self.left.values() if s is not None]
        unknown = len(self.left) - len(known)
        scale = 1.0
        if self.timed_expected_s > 0:
            low, high = SCALE_LIMITS
            scale = min(high, max(low, self.timed_measured_s / self.timed_expected_s))
        if self.finished:
            mean = self.measured_s / self.finished
        elif known:
            mean = sum(known) / len(known)
        else:
            return None if unknown else 0.0
        return (sum(known) * scale + unknown * mean) / self.workers


class Progress:
    """A one-line bar on `stream` when it is a terminal: `with Progress(...) as bar: bar.advance(key, s)`.

    `total` None: work of unknown length (a script running), shown as elapsed time only.
    """

    def __init__(self, label: str, total: int | None = None, estimate: Estimate | None = None,
                 stream: TextIO | None = None, enabled: bool | None = None):
        self.label = label
        self.total = total
        self.estimate = estimate
        self.stream = stream or sys.stderr
        self.enabled = is_terminal(self.stream) if enabled is None else enabled
        self.done = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._width = 0
        self._last_step = self.started

    def __enter__(self) -> "Progress":
        self.started = self._last_step = time.monotonic()
        if self.enabled:
            self._draw()
            self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self.enabled:
            with self._lock:
                self.stream.write("\r" + " " * self._width + "\r")  # the summary that follows replaces it
                self.stream.flush()

    def advance(self, key: Hashable = None, seconds: float | None = None) -> None:
        """One item done, which took `seconds` (its own time, not the wall time since the last one)."""
        self.done += 1
        if self.estimate is not None:
            self.estimate.finish(key, seconds)
        if self.enabled:
            self._draw()

    def step(self) -> None:
        """One more of items done one after another (keyed 0, 1, ...), each timed by the wall time
        since the previous one: for work that reports completions but not item times."""
        now = time.monotonic()
        last, self._last_step = self._last_step, now
        self.advance(self.done, now - last)

    def line(self) -> str:
        elapsed = _clock(time.monotonic() - self.started)
        if self.total is None:
            return f"{self.label}  {elapsed}"
        filled = int(BAR_WIDTH * self.done / self.total) if self.total else BAR_WIDTH
        remaining = self.estimate.remaining_s() if self.estimate is not None else None
        eta = "--:--" if remaining is None else _clock(remaining)
        return f"{self.label} [{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {self.done}/{self.total}  {elapsed}  left {eta}"

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            self._draw()

    def _draw(self) -> None:
        if not self.enabled:
            return
        with self._lock:
            text = self.line()
            pad = max(0, self._width - len(text))
            self._width = len(text)
            try:
                self.stream.write("\r" + text + " " * pad)
                self.stream.flush()
            except (OSError, ValueError):  # the terminal went away: the work goes on
                self.enabled = False


def is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02}:{rest % 60:02}" if hours else f"{rest // 60}:{rest % 60:02}"
