"""Page-corrupt and read-only databases: refused (corrupt) or named for what they are (read-only),
by the store and by every command, and never written."""

import json
import sqlite3

import pytest

from op_db.errors import InputError
from op_db.store import Store, open_for_reading

# A garbage index page is reported by quick_check as rows (the case that was ignored);
# a garbage table page makes the check itself raise.
CORRUPT_PAGES = ["results_status", "results"]


@pytest.fixture(params=CORRUPT_PAGES)
def corrupt_db(request, tmp_path, db_files):
    path = db_files.corrupt_page(db_files.make_db(tmp_path / "bad.db"), request.param)
    return path


def test_the_fixture_keeps_the_header_and_the_app_id_readable(corrupt_db):
    conn = sqlite3.connect(f"file:{corrupt_db}?mode=ro", uri=True)
    assert conn.execute("SELECT value FROM schema_info WHERE key = 'app'").fetchone() == ("neuron-check",)
    conn.close()


@pytest.mark.parametrize("opener", [
    lambda path: Store.open(path),
    lambda path: Store.open(path, readonly=True),
    lambda path: open_for_reading(path),
], ids=["write", "readonly", "for-reading"])
def test_a_page_corrupt_database_is_refused_untouched(corrupt_db, opener, db_files):
    before = db_files.digest(corrupt_db)
    with pytest.raises(InputError, match="is a corrupt database") as caught:
        opener(corrupt_db)
    assert str(corrupt_db) in str(caught.value) and "\n" not in str(caught.value)
    assert db_files.digest(corrupt_db) == before
    assert sorted(p.name for p in corrupt_db.parent.iterdir()) == ["bad.db"]


# Every command that opens a database, with the corrupt file in the place it reads or writes.
COMMANDS = {
    "ops": ["ops", "--device", "sim", "--ops", "add", "--dtype", "fp32", "--db", "bad.db"],
    "ops-resume": ["ops", "--resume", "1", "--db", "bad.db"],
    "models": ["models", "--device", "sim", "--arch", "llama", "--dtype", "fp32", "--db", "bad.db"],
    "runs": ["runs", "--db", "bad.db"],
    "report": ["report", "--db", "bad.db", "--format", "json"],
    "gate": ["gate", "--db", "bad.db", "--baseline", "1"],
    "profile": ["profile", "export", "--db", "bad.db", "-o", "profile.json"],
    "merge-input": ["merge", "bad.db", "-o", "out.db"],
    "merge-output": ["merge", "good.db", "-o", "bad.db"],
    "dashboard": ["dashboard", "--db", "bad.db", "-o", "site"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_refuses_a_page_corrupt_database(name, tmp_path, db_files):
    bad = db_files.corrupt_page(db_files.make_db(tmp_path / "bad.db"), "results_status")
    db_files.make_db(tmp_path / "good.db", results=3)
    before = {p.name: db_files.digest(p) for p in tmp_path.iterdir()}
    proc = db_files.run_cli(*COMMANDS[name], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = db_files.one_sentence(proc)
    assert "bad.db is a corrupt database" in line
    assert {p.name: db_files.digest(p) for p in tmp_path.iterdir()} == before  # nothing written, nothing new
    assert db_files.digest(bad) == before["bad.db"]


# -- read-only ------------------------------------------------------------------


def test_a_read_only_file_is_read_by_reports_and_refused_by_runs(sandbox, db_files):
    db = db_files.make_db(sandbox.root / "r.db", results=3)
    sandbox.lock(db)
    before = db_files.digest(db)
    listed = sandbox.cli("runs", "--db", "r.db", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert [r["counts"]["PASS"] for r in json.loads(listed.stdout)["runs"]] == [3]
    report = sandbox.cli("report", "--db", "r.db", "--format", "json")
    assert report.returncode == 0, report.stderr
    proc = sandbox.cli("ops", "--device", "sim", "--ops", "add", "--dtype", "fp32", "--db", "r.db")
    assert proc.returncode == 2
    assert db_files.one_sentence(proc) == (
        "neuron-check: error: database r.db is read-only; make it writable or pass --db (or set NEURON_CHECK_DB) with another file.")
    assert db_files.digest(db) == before
    # Readers of a WAL file in a writable folder share SQLite's own -wal/-shm; nothing else appears.
    assert {p.name for p in sandbox.root.iterdir()} <= {"r.db", "r.db-wal", "r.db-shm"}


def test_a_database_in_a_read_only_folder_is_read_and_not_called_corrupt(sandbox, db_files):
    folder = sandbox.root / "ro"
    folder.mkdir()
    db = db_files.make_db(folder / "r.db", results=3)
    sandbox.unlock(db)  # the file itself is writable: only the folder is not
    sandbox.lock(folder)
    before = db_files.digest(db)
    listed = sandbox.cli("runs", "--db", "ro/r.db")
    assert listed.returncode == 0, listed.stderr
    assert "finished" in listed.stdout
    proc = sandbox.cli("merge", str(db), "-o", "ro/out.db")
    assert proc.returncode == 2
    line = db_files.one_sentence(proc)
    assert "cannot create database ro/out.db" in line and "is read-only" in line and "corrupt" not in line
    proc = sandbox.cli("ops", "--device", "sim", "--ops", "add", "--dtype", "fp32", "--db", "ro/r.db")
    assert proc.returncode == 2
    line = db_files.one_sentence(proc)
    assert "cannot write database ro/r.db" in line and "is read-only" in line and "corrupt" not in line
    assert db_files.digest(db) == before
    assert sorted(p.name for p in folder.iterdir()) == ["r.db"]


def test_the_default_database_in_a_read_only_working_folder(sandbox, db_files):
    folder = sandbox.root / "cwd"
    folder.mkdir()
    sandbox.lock(folder)
    proc = sandbox.cli("ops", "--device", "sim", "--ops", "add", "--dtype", "fp32", cwd=folder)
    assert proc.returncode == 2
    line = db_files.one_sentence(proc)
    assert "cannot create database neuron-check.db" in line and "is read-only" in line
    assert list(folder.iterdir()) == []


def test_an_old_read_only_database_is_read_through_a_copy_migrated_in_memory(sandbox, db_files):
    db = db_files.make_v1_db(sandbox.root / "old.db", [{"started": "2026-01-01T00:00:00+00:00",
                                                       "finished": "2026-01-01T00:10:00+00:00",
                                                       "status": "finished"}])
    sandbox.lock(db)
    before = db_files.digest(db)
    listed = sandbox.cli("runs", "--db", "old.db", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    (run,) = json.loads(listed.stdout)["runs"]
    assert run["status"] == "finished" and run["heartbeat"] == "2026-01-01T00:10:00+00:00"
    assert db_files.digest(db) == before
