"""The harness's own time inside an item: work a correct backend must not be timed out for.

An item's time limit (--timeout) is there to catch a device that hangs or crawls. Part of an
item's time is the harness's, not the device's: the CPU reference, the float64 oracle, the
replay of the device's op sequence and the comparisons. Where the CPU's kernel in a dtype is
slow (grid_sampler_3d backward in float16: about 1 s a call on one core, 30 samples), that
reference alone can take as long as the device, so a fast device came out TIMEOUT because
the CPU is slow.

The worker measures the harness's blocks and reports the item's running total to whoever
enforces the limit, after each block ends. A block that never ends (a hung CPU kernel) is
never credited, so a hang is still caught. Reports can be thinned (`report_step_s`): a pipe
message after every block was two per sample, 37,000 in the fp32 sweep, and the parent woke for
each; with a step the total is sent once it has grown by that much, so the parent's view lags by
less than the step and a limit can come at most that much early.
"""

from __future__ import annotations

import time
from typing import Callable


class HarnessTime:
    """Seconds spent in the harness's own work during the current item."""

    def __init__(self, report: Callable[[float], None] | None = None, report_step_s: float = 0.0):
        self.report = report  # told the item's running total after each block (the worker's pipe)
        # Told only once the total has grown by this much since the last report (0: every block).
        self.report_step_s = report_step_s
        self.seconds = 0.0
        self.reported = 0.0  # the total as last reported
        self._depth = 0
        self._started = 0.0  # when the outermost open block began

    def start_item(self) -> None:
        self.seconds, self.reported, self._depth = 0.0, 0.0, 0

    def measure(self) -> "HarnessTime":
        """Count the block (`with clock.measure():`) as harness time; nested blocks count once.
        The clock is its own context manager, not a generator-based one: two blocks per OpInfo
        sample, 37,000 in the fp32 sweep, and a generator's set-up cost several times these."""
        return self

    def __enter__(self) -> None:
        if self._depth == 0:
            self._started = time.monotonic()
        self._depth += 1

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.seconds += time.monotonic() - self._started
            if self.report is not None and self.seconds - self.reported >= self.report_step_s:
                self.reported = self.seconds
                self.report(self.seconds)
