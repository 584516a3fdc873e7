"""An item's time limit counts the device's time, not the harness's own CPU reference and
comparisons: a correct backend is not timed out because the CPU's kernel is slow (issue 29)."""

from __future__ import annotations

import collections
import time
import types

from conformance.engine.config import RunConfig
from conformance.engine.local import LocalExecutor
from conformance.engine.harness_time import HarnessTime
from op_db.records import Status, WorkItem

ITEM = WorkItem("opinfo", "grid_sampler_3d", "backward", "float16", "eager")


def test_blocks_are_credited_when_they_end_and_nested_ones_once():
    reported = []
    clock = HarnessTime(report=reported.append)
    with clock.measure():
        with clock.measure():
            time.sleep(0.02)
        assert reported == []  # the outer block has not ended: a hang in it is never credited
    assert len(reported) == 1 and 0.02 <= reported[0] == clock.seconds < 1
    clock.start_item()
    assert clock.seconds == 0.0


def test_a_report_step_thins_the_reports_and_bounds_what_is_not_yet_credited():
    reported = []
    clock = HarnessTime(report=reported.append, report_step_s=0.03)
    for _ in range(6):
        with clock.measure():
            time.sleep(0.01)
        assert clock.seconds - (reported[-1] if reported else 0.0) < 0.03  # the parent's view lags less than a step
    assert 1 <= len(reported) <= 3 and reported == sorted(reported)
    clock.start_item()
    with clock.measure():
        time.sleep(0.001)
    assert clock.reported == 0.0 and len(reported) <= 3  # a new item starts its own count, unreported


class _Process:
    exitcode = None

    def __init__(self):
        self.killed = False

    def kill(self):
        self.killed = True

    def join(self, timeout=None):
        pass


def _worker_running_for(elapsed_s: float, harness_s: float):
    return types.SimpleNamespace(current=0, started_at=time.monotonic() - elapsed_s, harness_s=harness_s,
                                 batch=[(0, ITEM)], process=_Process())


def _lost(worker, timeout_s=4.0):
    worker.batch = collections.deque(worker.batch)
    return LocalExecutor._lost_item(worker, [ITEM], RunConfig(backend="sim", device="sim", timeout_s=timeout_s), dead=False)


def test_harness_time_is_not_counted_by_the_limit():
    worker = _worker_running_for(elapsed_s=6.0, harness_s=3.0)  # 3 s on the device, under the 4 s limit
    assert _lost(worker) is None
    assert not worker.process.killed


def test_device_time_over_the_limit_is_still_a_timeout_and_says_what_was_not_counted():
    worker = _worker_running_for(elapsed_s=9.0, harness_s=3.0)  # 6 s on the device
    result = _lost(worker)
    assert result.status is Status.TIMEOUT and worker.process.killed
    assert "3 s were the harness's own CPU reference and comparisons" in result.message
    plain = _lost(_worker_running_for(elapsed_s=5.0, harness_s=0.0))
    assert plain.status is Status.TIMEOUT
    assert plain.message == "the item ran longer than the 4 s limit; its worker was killed."
