"""Run owners and heartbeats: a run whose owner is gone reads as abandoned; a live run cannot be
claimed twice; older databases are migrated with their runs judged by their last activity."""

import datetime as dt
import os
import platform
import subprocess
import sys
import time

import pytest

from op_db.errors import InputError
from op_db.ownership import Liveness, Owner, owner_alive, pid_alive, process_start_time
from op_db.sample import result
from op_db.store import Store, open_for_reading


def iso(seconds_ago: float) -> str:
    moment = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=seconds_ago)
    return moment.isoformat(timespec="seconds")




@pytest.fixture
def db(tmp_path):
    path = tmp_path / "r.db"
    with Store.open(path) as store:
        store.create_run(backend="sim", device="sim")
    return path


def status_of(path, run_id=1):
    with open_for_reading(path) as store:
        return store.run(run_id)["status"]




@pytest.fixture
def live_process():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_new_run_is_owned_by_this_process_and_running(db):
    with open_for_reading(db) as store:
        run = store.run(1)
    assert (run["owner_host"], run["owner_pid"]) == (platform.node(), os.getpid())
    assert abs(run["owner_started"] - process_start_time(os.getpid())) < 1e-6
    assert run["status"] == "running" and run["heartbeat"] == run["started"]


def test_a_run_whose_process_died_is_abandoned(db, dead_pid, set_run):
    set_run(db, 1, owner_pid=dead_pid, owner_started=None)
    assert status_of(db) == "abandoned"


def test_a_run_whose_pid_was_reused_by_another_process_is_abandoned(db, set_run):
    # Same pid, but the process now holding it started at another time.
    set_run(db, 1, owner_started=process_start_time(os.getpid()) - 1000)
    assert status_of(db) == "abandoned"


def test_a_zombie_owner_is_gone():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 30
    while pid_alive(proc.pid) and time.time() < deadline:  # exited but not yet reaped: a zombie
        time.sleep(0.05)
    try:
        assert not pid_alive(proc.pid)
    finally:
        proc.wait()


@pytest.mark.parametrize("seconds_ago, expected", [(10, "running"), (3600, "abandoned")])
def test_another_hosts_run_is_judged_by_its_heartbeat(db, seconds_ago, expected, set_run):
    set_run(db, 1, owner_host="some-other-host", heartbeat=iso(seconds_ago))
    assert status_of(db) == expected


def test_liveness_rule_thresholds():
    here = "this-host"
    other = Owner(host="elsewhere", pid=1, started=None)
    now = time.time()
    strict = Liveness(stale_after_s=5)
    assert owner_alive(other, now - 4, now=now, here=here, liveness=strict)
    assert not owner_alive(other, now - 6, now=now, here=here, liveness=strict)
    assert not owner_alive(None, None, now=now, here=here)


def test_a_finished_run_is_finished_whatever_its_owner(db, dead_pid, set_run):
    with Store.open(db) as store:
        store.finish_run(1)
    set_run(db, 1, owner_pid=dead_pid)
    assert status_of(db) == "finished"


def test_a_live_run_cannot_be_claimed(db, live_process, set_run):
    set_run(db, 1, owner_pid=live_process.pid, owner_started=process_start_time(live_process.pid))
    with Store.open(db) as store:
        with pytest.raises(InputError, match=f"run 1 is still running \\(process {live_process.pid} on "):
            store.claim_run(1)
        assert store.run(1)["owner_pid"] == live_process.pid


def test_an_abandoned_run_is_claimed_by_the_resuming_process(db, dead_pid, set_run):
    set_run(db, 1, owner_pid=dead_pid, heartbeat=iso(3600), finished=iso(3000), status="interrupted")
    with Store.open(db) as store:
        store.claim_run(1)
        run = store.run(1)
    assert (run["owner_pid"], run["status"], run["finished"]) == (os.getpid(), "running", None)
    assert run["heartbeat"] >= iso(5)


def test_results_and_the_timer_refresh_the_heartbeat(db, set_run):
    old = iso(3600)
    set_run(db, 1, heartbeat=old)
    with Store.open(db) as store:
        store.add_result(1, result("add", "float32", "PASS"))
        assert store.run(1)["heartbeat"] > old
        set_run(db, 1, heartbeat=old)
        with store.keep_alive(1, interval_s=0.05):
            deadline = time.time() + 30
            while store.run(1)["heartbeat"] == old and time.time() < deadline:
                time.sleep(0.05)
        assert store.run(1)["heartbeat"] > old


def test_an_older_database_gains_owner_columns_and_judges_runs_by_last_activity(tmp_path, db_files):
    path = db_files.make_v1_db(tmp_path / "v1.db", [
        {"started": iso(7200), "status": "running"},  # its process is long gone: nothing says otherwise
        {"started": iso(7200), "finished": iso(7000), "status": "finished"},
        {"started": iso(5), "status": "running"},  # started moments ago, maybe by an old neuron-check
    ])
    with Store.open(path) as store:
        runs = store.runs()
        assert [r["status"] for r in runs] == ["abandoned", "finished", "running"]
        assert [r["heartbeat"] for r in runs] == [runs[0]["started"], runs[1]["finished"], runs[2]["started"]]
        assert all(r["owner_pid"] is None for r in runs)
        # The migrated file takes new runs with owners.
        new = store.create_run(backend="sim", device="sim")
        assert store.run(new)["owner_pid"] == os.getpid()
