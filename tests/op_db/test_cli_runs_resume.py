"""The CLI side of run ownership: `runs` shows abandoned runs, `--resume` refuses a live run and
options that differ from the run's own, and run ids / selections that name nothing exit 2."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from op_db.errors import InputError
from op_db.store import Store, open_for_reading






def test_runs_shows_a_run_whose_owner_died_as_abandoned(tmp_path, dead_pid, db_files, set_run):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        store.create_run(backend="sim", device="sim")
    set_run(db, 1, owner_pid=dead_pid)
    table = db_files.run_cli("runs", "--db", db, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    row = table.stdout.splitlines()[-1]
    assert "abandoned" in row and "running" not in row
    listed = db_files.run_cli("runs", "--db", db, "--format", "json", cwd=tmp_path)
    (run,) = json.loads(listed.stdout)["runs"]
    assert (run["status"], run["owner_pid"]) == ("abandoned", dead_pid)


@pytest.fixture(scope="module")
def ops_run(tmp_path_factory, db_files):
    """A real, finished `ops` run on sim: abs in float32, one sample."""
    folder = tmp_path_factory.mktemp("ops-run")
    proc = db_files.run_cli("ops", "--device", "sim", "--ops", "abs", "--dtype", "fp32", "--max-samples", "1",
                            "--db", folder / "r.db", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    return folder / "r.db"


@pytest.fixture
def ops_db(ops_run, tmp_path):
    db = tmp_path / "r.db"
    shutil.copy(ops_run, db)
    return db


# Each option the run recorded, given with a different value. One command gives them all: the
# refusal names every difference (one command per option proved nothing more, at a torch import each).
DIFFERING = [
    (["--dtype", "bf16"], "--dtype bfloat16 (the run has float32)"),
    (["--ops", "mul"], "--ops mul (the run has abs)"),
    (["--grad"], "--grad (the run was started without it)"),
    (["--device", "cpu"], "--device cpu (the run has sim)"),
    (["--seed", "3"], "--seed 3 (the run has 0)"),
    (["--timeout", "5"], "--timeout 5.0 (the run has 120.0)"),
    (["--max-samples", "4"], "--max-samples 4 (the run has 1)"),
    (["--mode", "compile"], "--mode compile (the run has eager)"),
]
REFUSED = ("neuron-check: error: --resume 1 cannot change the run's options: {}; "
           "leave them out to resume the run as it was started, or start a new run.")


def test_resume_refuses_an_option_that_differs_from_the_runs_own(ops_db, db_files):
    before = db_files.digest(ops_db)
    proc = db_files.run_cli("ops", "--db", ops_db, "--resume", "1", "--dtype", "bf16", cwd=ops_db.parent)
    assert proc.returncode == 2
    assert db_files.one_sentence(proc) == REFUSED.format("--dtype bfloat16 (the run has float32)")
    assert db_files.digest(ops_db) == before


def test_resume_names_every_option_that_differs(ops_db, db_files):
    before = db_files.digest(ops_db)
    proc = db_files.run_cli("ops", "--db", ops_db, "--resume", "1", *(a for args, _ in DIFFERING for a in args),
                            cwd=ops_db.parent)
    assert proc.returncode == 2
    line = db_files.one_sentence(proc)
    named = line.removeprefix(REFUSED.split("{}")[0]).removesuffix(REFUSED.split("{}")[1]).split("; ")
    assert sorted(named) == sorted(difference for _, difference in DIFFERING), line
    assert db_files.digest(ops_db) == before


def test_resume_accepts_its_own_options_and_ones_that_change_no_result(ops_db, db_files):
    proc = db_files.run_cli("ops", "--db", ops_db, "--resume", "1", "--ops", "abs", "--dtype", "fp32",
                            "--max-samples", "1", "--jobs", "2", "--junit", ops_db.parent / "j.xml",
                            "--fail-on", "MISMATCH", cwd=ops_db.parent)
    assert proc.returncode == 0, proc.stderr
    assert "run 1: 0 items" in proc.stderr
    with open_for_reading(ops_db) as store:
        assert store.run(1)["status"] == "finished" and store.run(1)["options"]["timeout_s"] == 120.0


def test_models_resume_names_a_changed_arch_and_divergence(tmp_path, db_files):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        run_id = store.create_run(backend="sim", device="sim", options={
            "suite": "model", "archs": ["llama"], "tasks": [], "dtypes": ["fp32"], "modes": ["eager"], "grad": False,
            "generate": False, "attn": "eager", "divergence": True, "seed": 0, "compile_backend": None,
            "run_group": None, "timeout_s": 300.0, "sim_profile": None})
        store.finish_run(run_id)
    proc = db_files.run_cli("models", "--db", db, "--resume", "1", "--arch", "gpt2", "--no-divergence", cwd=tmp_path)
    assert proc.returncode == 2
    line = db_files.one_sentence(proc)
    assert "--arch gpt2 (the run has llama); --no-divergence (the run was started without it)" in line


HANG_ADD = {"name": "hang-add", "faults": [{"op": "aten.add.Tensor", "kind": "hang"}]}


def wait_for_run(db, deadline_s=120.0):
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        try:
            with open_for_reading(db) as store:
                return store.run(1)
        except InputError:
            time.sleep(0.2)
    raise AssertionError("the first run never recorded itself")


@pytest.mark.slow
def test_a_live_run_is_not_resumed_twice_and_its_abandoned_remains_are(tmp_path, db_files):
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps(HANG_ADD))
    db = tmp_path / "r.db"
    first = subprocess.Popen(
        [sys.executable, "-m", "porting_cli", "ops", "--device", "sim", "--sim-profile", str(profile), "--ops",
         "add,mul", "--dtype", "fp32", "--max-samples", "1", "--timeout", "300", "--db", str(db)],
        cwd=tmp_path, env=db_files.cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)  # its own process group: the hung worker dies with it below
    try:
        run = wait_for_run(db)
        assert (run["status"], run["owner_pid"]) == ("running", first.pid)
        refused = db_files.run_cli("ops", "--db", db, "--resume", "1", cwd=tmp_path)
        assert refused.returncode == 2
        assert f"run 1 is still running (process {first.pid} on " in db_files.one_sentence(refused)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    listed = db_files.run_cli("runs", "--db", db, "--format", "json", cwd=tmp_path)
    assert [r["status"] for r in json.loads(listed.stdout)["runs"]] == ["abandoned"]
    # The fault is fixed in place (the run keeps its profile path); resuming finishes the run.
    profile.write_text(json.dumps({"name": "fixed"}))
    resumed = db_files.run_cli("ops", "--db", db, "--resume", "1", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    with open_for_reading(db) as store:
        assert store.run(1)["status"] == "finished"
        assert sorted((r.subject, r.status.value) for r in store.results(1)) == [("add", "PASS"), ("mul", "PASS")]


@pytest.mark.parametrize("args, phrase", [
    (["report", "--run", "99999999999999999999999"], "run 99999999999999999999999 does not exist in r.db."),
    (["report", "--run", "-3"], "run -3 does not exist in r.db."),
    (["profile", "export", "--run", "1e99", "-o", "p.json"], "run must be a number or 'latest', not '1e99'."),
    (["ops", "--resume", "99999999999999999999999"], "run 99999999999999999999999 does not exist in r.db."),
])
def test_run_ids_that_name_no_run_exit_2(ops_db, args, phrase, db_files):
    before = db_files.digest(ops_db)
    proc = db_files.run_cli(*args, "--db", "r.db", cwd=ops_db.parent)
    assert proc.returncode == 2
    assert db_files.one_sentence(proc) == f"neuron-check: error: {phrase}"
    assert db_files.digest(ops_db) == before


@pytest.mark.parametrize("args, flag", [
    (["ops", "--device", "sim", "--ops", ""], "--ops"),
    (["ops", "--device", "sim", "--ops", " , "], "--ops"),
    (["ops", "--device", "sim", "--ops", "abs", "--dtype", ""], "--dtype"),
    (["models", "--device", "sim", "--arch", ""], "--arch"),
])
def test_an_empty_selection_is_an_error_not_everything(tmp_path, args, flag, db_files):
    proc = db_files.run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{flag} " in db_files.one_sentence(proc) and "selects nothing" in proc.stderr
    assert list(tmp_path.iterdir()) == []  # not even the default database was created
