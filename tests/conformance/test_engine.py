"""The engine: worker isolation (crash, hang), resume after a killed parent, sharding."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance import backends
from conformance.engine.config import RunConfig
from conformance.engine import local as engine
from conformance.engine.local import InlineExecutor, prestart_workers, run_items, start_run
from conformance.planning import OpsOptions
from conformance.suite import plan as plan_command
from op_db.errors import InputError
from op_db.records import Status, WorkItem
from op_db.store import Store

PROFILES = Path(__file__).parent / "profiles"


def items(*subjects, dtype="float32"):
    return [WorkItem("opinfo", s, "forward", dtype, "eager") for s in subjects]


def new_run(tmp_path, config, options=None):
    store = Store.open(tmp_path / "results.db")
    adapter = backends.get(config.backend)
    adapter.init()
    return store, start_run(store, config, adapter, options or {"suite": "opinfo"}, command="test")


@pytest.fixture(scope="module")
def crash_hang_run(tmp_path_factory):
    """One pooled run over a profile whose atan2 crashes and erfinv hangs. Its first two
    workers are prestarted before the profile is set anywhere, so the faults prove that
    the run's configuration reaches them; the replacements are spawned afresh."""
    tmp = tmp_path_factory.mktemp("crash")
    prestart_workers(2, ("opinfo",))
    os.environ["NEURON_CHECK_SIM_PROFILE"] = str(PROFILES / "crash_hang.json")
    try:
        config = RunConfig(backend="sim", device="sim", jobs=2, timeout_s=4.0, suite_options=OpsOptions(max_samples=2),
                           sim_profile=str(PROFILES / "crash_hang.json"))
        store, run_id = new_run(tmp, config)
        plan_items = items("add", "atan2", "sub", "erfinv", "mul", "abs")
        started = time.monotonic()
        summary = run_items(plan_items, config, store, run_id, progress=False)
        wall = time.monotonic() - started
        yield store, run_id, summary, {r.subject: r for r in store.results(run_id)}, wall
    finally:
        os.environ.pop("NEURON_CHECK_SIM_PROFILE", None)
        import conformance.sim as sim

        sim.set_profile(None)


def test_crash_gives_crash_with_signal_name(crash_hang_run):
    _, _, _, results, _ = crash_hang_run
    assert results["atan2"].status is Status.CRASH
    assert "SIGSEGV" in results["atan2"].message


def test_hang_gives_timeout_within_the_limit(crash_hang_run):
    _, _, _, results, wall = crash_hang_run
    assert results["erfinv"].status is Status.TIMEOUT
    assert 4.0 <= results["erfinv"].duration_s < 4.0 + 5
    assert wall < 120


def test_prestarted_workers_are_taken_by_the_run(crash_hang_run):
    assert engine._PRESTARTED == []


def test_other_items_complete_after_crash_and_hang(crash_hang_run):
    store, run_id, summary, results, _ = crash_hang_run
    assert sorted(results) == ["abs", "add", "atan2", "erfinv", "mul", "sub"]
    assert all(results[s].status is Status.PASS for s in ("add", "sub", "mul", "abs"))
    assert summary.done == 6 and not summary.interrupted
    assert store.run(run_id)["status"] == "finished"


def test_workers_see_the_environment_as_it_is_when_they_start(tmp_path, monkeypatch):
    """Workers fork from a server started before the run (conformance/engine/preforked.py),
    whose own environment is from its start: a profile named only in the environment, and
    only after that start, must still reach the workers, here as atan2's CRASH."""
    prestart_workers(1, ("opinfo",))
    config = RunConfig(backend="sim", device="sim", jobs=1, suite_options=OpsOptions(max_samples=1))
    store, run_id = new_run(tmp_path, config)  # before the profile: this process's sim stays fault-free
    monkeypatch.setenv("NEURON_CHECK_SIM_PROFILE", str(PROFILES / "crash_hang.json"))
    summary = run_items(items("add", "atan2", "sub"), config, store, run_id, progress=False)
    assert {r.subject: r.status for r in store.results(run_id)} == {
        "add": Status.PASS, "atan2": Status.CRASH, "sub": Status.PASS}
    assert summary.done == 3


def test_run_records_metadata(crash_hang_run):
    store, run_id, _, _, _ = crash_hang_run
    run = store.run(run_id)
    assert run["backend"] == "sim" and run["simulated"] is True
    assert run["torch_version"] and run["host"] and run["command"] == "test"


def test_shards_together_equal_the_unsharded_run(tmp_path):
    options = OpsOptions(ops=("add", "mul", "sub", "abs", "neg", "exp", "sin", "cos"), dtypes=("float32", "bfloat16"))
    config = RunConfig(backend="sim", device="sim", suite_options=OpsOptions(max_samples=2), executor="inline")
    outcomes = {}
    for shard in (None, "1/2", "2/2"):
        shard_items = plan_command("ops", OpsOptions(**{**options.__dict__, "shard": shard}))
        store, run_id = new_run(tmp_path, config)
        run_items(shard_items, config, store, run_id, progress=False, executor=InlineExecutor())
        outcomes[shard] = {(r.item, r.status, r.samples, r.max_abs_err) for r in store.results(run_id)}
    assert outcomes["1/2"] and outcomes["2/2"]
    assert not outcomes["1/2"] & outcomes["2/2"]
    assert outcomes["1/2"] | outcomes["2/2"] == outcomes[None]
    assert len(outcomes[None]) == 16


def test_full_plan_shards_partition_it():
    whole = plan_command("ops", OpsOptions(dtypes=("float32",)))
    halves = plan_command("ops", OpsOptions(dtypes=("float32",), shard="1/2")) + plan_command("ops", OpsOptions(dtypes=("float32",), shard="2/2"))
    assert sorted(halves) == sorted(whole)
    assert plan_command("ops", OpsOptions(dtypes=("float32",), shard="1/2")) == plan_command("ops", OpsOptions(dtypes=("float32",), shard="1/2"))


def test_resume_after_parent_sigkill_loses_and_duplicates_nothing(tmp_path):
    db = tmp_path / "resume.db"
    ops = "add,sub,mul,div.no_rounding_mode,abs,neg,exp,log,sin,cos,tan,tanh,sigmoid,sqrt,rsqrt,floor,ceil,round"
    env = {**os.environ, "NEURON_CHECK_DB": str(db)}
    env.pop("NEURON_CHECK_SIM_PROFILE", None)
    parent = subprocess.Popen([sys.executable, "-m", "porting_cli", "ops", "--device", "sim", "--ops", ops, "--dtype", "fp32,bf16,fp16",
                               "--max-samples", "10"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        stored = 0
        while time.monotonic() < deadline and parent.poll() is None:
            try:
                with Store.open(db, readonly=True) as store:
                    runs = store.runs()
                    stored = len(store.stored_items(runs[0]["id"])) if runs else 0
            except InputError:
                pass  # not created yet
            if stored >= 3:
                break
            time.sleep(0.05)
        assert parent.poll() is None, "the run finished before it could be killed; give it more items"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
    with Store.open(db, readonly=True) as store:
        run_id = store.runs()[0]["id"]
        before = {r.item: r for r in store.results(run_id)}
        assert store.run(run_id)["status"] == "abandoned"  # marked running, but its owner is dead
    assert 3 <= len(before) < 54  # 18 ops x 3 dtypes: enough work that a loaded machine's poll sees it unfinished
    done = subprocess.run([sys.executable, "-m", "porting_cli", "ops", "--resume", str(run_id)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with Store.open(db, readonly=True) as store:
        after = store.results(run_id)
        assert store.run(run_id)["status"] == "finished"
        assert len(store.runs()) == 1
    planned = plan_command("ops", OpsOptions(ops=tuple(ops.split(",")), dtypes=("float32", "bfloat16", "float16")))
    assert sorted(r.item for r in after) == sorted(planned)  # nothing lost, nothing twice
    for result in after:
        if result.item in before:  # stored items were not run again
            assert result.duration_s == before[result.item].duration_s


class _InterruptedAfter(InlineExecutor):
    """Runs items inline and raises `stop` (default KeyboardInterrupt, a Ctrl-C) after `n` results."""

    def __init__(self, n, stop=KeyboardInterrupt):
        self.n, self.stop = n, stop

    def execute(self, items, config, emit):
        def emit_then_stop(result):
            emit(result)
            self.n -= 1
            if self.n == 0:
                raise self.stop
        super().execute(items, config, emit_then_stop)


def test_ctrl_c_keeps_finished_items_and_marks_the_run_interrupted(tmp_path):
    config = RunConfig(backend="sim", device="sim", suite_options=OpsOptions(max_samples=1))
    store, run_id = new_run(tmp_path, config)
    summary = run_items(items("add", "sub", "mul", "abs"), config, store, run_id, progress=False,
                        executor=_InterruptedAfter(2))
    assert summary.interrupted and summary.done == 2
    assert store.run(run_id)["status"] == "interrupted"
    assert {r.subject for r in store.results(run_id)} == {"add", "sub"}


def test_an_executor_that_cannot_go_on_leaves_an_interrupted_run_to_resume(tmp_path, capsys):
    """RunStopped (every node of a Ray cluster gone): interrupted, results kept, the reason and the
    --resume command printed, exit 75."""
    from conformance.engine.local import RunStopped
    from porting_cli.cli.options import EXIT_STOPPED, run_and_report

    config = RunConfig(backend="sim", device="sim", suite_options=OpsOptions(max_samples=1))
    store, run_id = new_run(tmp_path, config)
    stop = RunStopped("no node of the Ray cluster is left to run on (2 item(s) not run)")
    code = run_and_report(store, items("add", "sub", "mul", "abs"), config, backends.get("sim"), run_id,
                          command_name="ops", junit_path=None, failing_statuses=set(), strict_fallback=False,
                          executor=_InterruptedAfter(2, stop))
    assert code == EXIT_STOPPED == 75
    assert store.run(run_id)["status"] == "interrupted"
    assert {r.subject for r in store.results(run_id)} == {"add", "sub"}
    said = capsys.readouterr().err
    assert f"run {run_id} interrupted (no node of the Ray cluster is left to run on (2 item(s) not run))" in said
    assert f"neuron-check ops --resume {run_id} --db " in said
