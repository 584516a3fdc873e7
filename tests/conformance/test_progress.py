"""The progress bar: drawn on a terminal only, its estimate from measured item times
(issue 31, items 1 and 2)."""

import io
import sys

import pytest

from conformance.engine.progress import Estimate, Progress
from op_db.records import Result, Status, WorkItem
from op_db.sample import result, write_sample_run
from op_db.store import Store


class Terminal(io.StringIO):
    def isatty(self):
        return True


def items(*names):
    return [WorkItem("opinfo", name, "forward", "float32", "eager") for name in names]


def test_no_estimate_before_anything_is_measured():
    estimate = Estimate(items("a", "b", "c"))
    assert estimate.remaining_s() is None
    estimate.finish(items("a")[0], 2.0)
    assert estimate.remaining_s() == pytest.approx(4.0)  # two more items at this run's mean


def test_stored_times_first_then_scaled_by_this_runs_speed():
    a, b, c, d = items("a", "b", "c", "d")
    estimate = Estimate([a, b, c, d], {a: 1.0, b: 2.0, c: 3.0}, workers=1)
    assert estimate.remaining_s() == pytest.approx(6.0 + 2.0)  # d, never timed, counts as the mean known item
    estimate.finish(a, 2.0)  # this run is twice as slow as the stored one
    assert estimate.remaining_s() == pytest.approx((2.0 + 3.0) * 2 + 2.0)
    estimate.finish(d, 4.0)
    assert estimate.remaining_s() == pytest.approx((2.0 + 3.0) * 2)


def test_workers_share_the_remaining_time():
    a, b = items("a", "b")
    assert Estimate([a, b], {a: 3.0, b: 5.0}, workers=2).remaining_s() == pytest.approx(4.0)


def test_quiet_off_a_terminal_and_drawn_on_one():
    pipe = io.StringIO()
    with Progress("items", 2, stream=pipe) as bar:
        bar.advance()
    assert pipe.getvalue() == ""
    tty = Terminal()
    a, b = items("a", "b")
    with Progress("items", 2, Estimate([a, b], {a: 61.0, b: 60.0}), stream=tty) as bar:
        bar.advance(a, 61.0)
    drawn = tty.getvalue().split("\r")
    assert "items [------------------------] 0/2  0:00  left 2:01" in drawn
    assert "items [############------------] 1/2  0:00  left 1:00" in drawn
    assert drawn[-1].strip() == ""  # cleared for the summary


def test_a_run_estimates_from_the_stores_times_of_the_same_items(tmp_path, monkeypatch):
    """An engine run on a terminal starts its estimate from an earlier run's duration_s."""
    import sys

    from conformance.engine.config import RunConfig
    from conformance.engine import local

    chosen = items("add", "mul")
    with Store.open(tmp_path / "r.db") as store:
        write_sample_run(store, [result("add", "float32", "PASS", duration_s=30.0),
                                 result("mul", "float32", "PASS", duration_s=90.0)])
        run_id = store.create_run(backend="sim", device="sim")

        class Instant(local.Executor):
            def execute(self, work, config, emit):
                for item in work:
                    emit(Result.for_item(item, Status.PASS, duration_s=0.5))

        tty = Terminal()
        monkeypatch.setattr(sys, "stderr", tty)
        local.run_items(chosen, RunConfig(backend="sim", device="sim"), store, run_id, executor=Instant())
    drawn = tty.getvalue().split("\r")
    assert "items [------------------------] 0/2  0:00  left 2:00" in drawn
    assert "items [############------------] 1/2  0:00  left 0:09" in drawn  # 90 s x (0.5 / 30) at the floor 0.1


def test_the_porting_runtime_check_shows_progress_on_a_terminal_only(tmp_path):
    """While the script runs, a terminal sees what runs and for how long (a pipe sees nothing:
    test_quiet_off_a_terminal_and_drawn_on_one)."""
    import os
    import pty
    import subprocess

    from tests.porting_cli.conftest import cli_env

    script = tmp_path / "slow.py"
    script.write_text("import time\n\ntime.sleep(1.5)\n")
    command = [sys.executable, "-m", "porting_cli", str(script), "--device", "cpu", "--format", "json"]
    main, terminal = pty.openpty()
    try:
        proc = subprocess.run(command, cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=terminal,
                              timeout=300)
        os.set_blocking(main, False)
        shown = os.read(main, 1 << 16).decode()
    finally:
        os.close(main)
        os.close(terminal)
    assert proc.returncode == 0
    assert "\rrunning slow.py on cpu (2 steps, at most 300 s)  0:01" in shown


TQDM_IN_A_WORKER = """
import multiprocessing, multiprocessing.resource_tracker as tracker, sys
multiprocessing.set_start_method("spawn")  # as in the engine's workers: named semaphores
registered = []
tracker.register = lambda name, kind: registered.append(kind)
if sys.argv[1] == "fixed":
    from conformance.engine.worker import _no_cross_process_bar_lock
    _no_cross_process_bar_lock()
import tqdm
for _ in tqdm.tqdm(range(2), disable=True):
    pass
print(registered)
"""


@pytest.mark.parametrize("setup, registered", [("plain", "['semaphore']"), ("fixed", "[]")])
def test_a_worker_makes_no_semaphore_for_tqdm(setup, registered):
    """torch.fx draws a tqdm bar in compile mode; tqdm's default lock is a named semaphore that a
    killed worker leaks (the resource tracker's warning after every compile-mode run, issue 31,
    item 10). 'plain' shows what a worker made before."""
    import subprocess

    from tests.porting_cli.conftest import cli_env

    out = subprocess.run([sys.executable, "-c", TQDM_IN_A_WORKER, setup], env=cli_env(), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == registered


def test_a_project_scan_counts_its_files_on_a_terminal(tmp_path, monkeypatch):
    from porting_cli.analysis.batch_scan import ScanOptions
    from porting_cli.analysis.project import discover, scan_project

    for n in range(3):
        (tmp_path / f"m{n}.py").write_text("x = x.cuda()\n")
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setattr("porting_cli.analysis.batch_scan.ScanOptions", lambda jobs=0: ScanOptions(jobs=1, cache=None))
    scan_project(discover(str(tmp_path), None))
    drawn = [text.rsplit("  ", 2)[0] for text in tty.getvalue().split("\r")]
    assert drawn[1] == "scanning files [------------------------] 0/3"
    assert "scanning files [########################] 3/3" in drawn
