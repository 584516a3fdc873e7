"""A killed or terminated `neuron-check ops` takes its workers with it, even a hung one, and
SIGTERM stops a run the way Ctrl-C does (conformance/engine/lifeline.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.engine import proctree
from conformance.engine.lifeline import ORPHAN_EXIT, Terminated, exit_status, interrupt_on_sigterm
from conformance.planning import OpsOptions
from conformance.suite import plan
from op_db.errors import InputError
from op_db.records import Status
from op_db.store import Store

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

REPO = Path(__file__).resolve().parents[2]
OPS = "add,sub,erfinv"  # erfinv hangs; the other two finish, so the run is known to be on the hang
HANG_PROFILE = '{"name": "hang-erfinv", "faults": [{"op": "aten.erfinv.default", "kind": "hang"}]}'
GONE_WITHIN_S = 5.0
# Long enough that the hang is still running when the test signals (about 1 s after it began),
# short enough that the resume, which keeps the run's options, cuts it off as TIMEOUT.
HANG_TIMEOUT_S = 15


@pytest.fixture
def hung_run(tmp_path):
    """`neuron-check ops` with two workers, one of them hung in erfinv: (parent, db, workers)."""
    profile = tmp_path / "hang.json"
    profile.write_text(HANG_PROFILE)
    db = tmp_path / "signals.db"
    env = {**os.environ, "NEURON_CHECK_DB": str(db),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("NEURON_CHECK_SIM_PROFILE", None)
    parent = subprocess.Popen([sys.executable, "-m", "porting_cli", "ops", "--device", "sim", "--sim-profile",
                               str(profile), "--ops", OPS, "--dtype", "fp32", "--max-samples", "1", "-j", "2",
                               "--timeout", str(HANG_TIMEOUT_S)], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    workers: set[proctree.Proc] = set()
    try:
        _wait_for_stored(parent, db, 2)
        time.sleep(1.0)  # the last item reaches a worker and hangs there
        workers = proctree.descendants(parent.pid)
        assert len(workers) >= 2, "expected two workers (and multiprocessing's resource tracker)"
        yield parent, db, workers, env
    finally:  # never leave a hung worker on the machine, whatever the test found
        for leftover in proctree.alive(workers | proctree.descendants(parent.pid)):
            os.kill(leftover.pid, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()
        parent.communicate(timeout=30)


def _wait_for_stored(parent: subprocess.Popen, db: Path, count: int, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert parent.poll() is None, f"the run ended early: {parent.communicate()[1]}"
        try:
            with Store.open(db, readonly=True) as store:
                runs = store.runs()
                if runs and len(store.stored_items(runs[0]["id"])) >= count:
                    return
        except InputError:
            pass  # not created yet
        time.sleep(0.1)
    raise AssertionError(f"fewer than {count} items were stored within {timeout_s:g} s")


def _left_behind(workers: set[proctree.Proc]) -> set[proctree.Proc]:
    deadline = time.monotonic() + GONE_WITHIN_S
    while proctree.alive(workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    return proctree.alive(workers)


def test_sigkill_of_the_parent_kills_every_worker_even_a_hung_one(hung_run):
    parent, _, workers, _ = hung_run
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(10)
    assert _left_behind(workers) == set()


@pytest.mark.parametrize("target", ["parent", "group"])
def test_sigterm_interrupts_like_ctrl_c_and_resume_finishes_the_run(hung_run, target):
    """`group`: as `timeout` and process managers do, every process gets SIGTERM (the parent
    twice); the workers' deaths must not become CRASH results."""
    parent, db, workers, env = hung_run
    if target == "group":
        os.kill(parent.pid, signal.SIGTERM)
        os.killpg(parent.pid, signal.SIGTERM)
    else:
        os.kill(parent.pid, signal.SIGTERM)
    _, stderr = parent.communicate(timeout=60)
    assert parent.returncode == 143, stderr
    assert _left_behind(workers) == set()
    with Store.open(db, readonly=True) as store:
        run_id = store.runs()[0]["id"]
        assert store.run(run_id)["status"] == "interrupted"
        before = {r.item: r for r in store.results(run_id)}
    assert {item.subject for item in before} == {"add", "sub"}
    assert all(r.status is not Status.CRASH for r in before.values())
    resume_lines = [line for line in stderr.splitlines() if "--resume" in line]
    assert resume_lines == [f"neuron-check: run {run_id} interrupted; finish it with: "
                            f"neuron-check ops --resume {run_id}"], stderr

    done = subprocess.run([sys.executable, "-m", "porting_cli", "ops", "--resume", str(run_id)],
                          env=env, cwd=db.parent, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with Store.open(db, readonly=True) as store:
        after = store.results(run_id)
        assert store.run(run_id)["status"] == "finished"
    planned = plan("ops", OpsOptions(ops=tuple(OPS.split(",")), dtypes=("float32",)))
    assert sorted(r.item for r in after) == sorted(planned)  # nothing lost, nothing twice
    by_item = {r.item: r for r in after}
    for item, result in before.items():  # stored items were not run again
        assert by_item[item].duration_s == result.duration_s
    assert [r.status for r in after if r.subject == "erfinv"] == [Status.TIMEOUT]


def test_exit_status_is_128_plus_the_signal():
    assert exit_status(KeyboardInterrupt()) == 130
    assert exit_status(Terminated()) == 143


def test_sigterm_raises_terminated_once_then_is_ignored_while_stopping():
    previous = signal.getsignal(signal.SIGTERM)
    try:
        interrupt_on_sigterm()
        with pytest.raises(Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs here
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN  # a second one must not cut the stop short
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_worker_whose_parent_is_already_gone_exits_at_once():
    """The race die_with_parent closes: the parent died before the worker could ask to die with it."""
    code = ("import os\n"
            "from conformance.engine.lifeline import die_with_parent\n"
            "die_with_parent(parent_pid=os.getppid() + 1)\n"  # as if reparented since
            "print('survived')\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (ORPHAN_EXIT, "")
