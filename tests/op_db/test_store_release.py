"""No -wal/-shm files stay beside a database once every process using it has ended (issue 31, item 9)."""

from op_db.sample import write_sample_run
from op_db.store import Store, open_for_reading

from .conftest import run_cli

SIDE_FILES = ("-wal", "-shm")


def side_files(path):
    return sorted(path.name + s for s in SIDE_FILES if path.with_name(path.name + s).exists())


def test_a_reader_closing_last_removes_the_wal_files(tmp_path):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        write_sample_run(store)
    assert side_files(db) == []
    with open_for_reading(db) as reader:
        assert reader.runs()
        assert side_files(db) == ["r.db-shm", "r.db-wal"]  # SQLite's own, while it reads
    assert side_files(db) == []
    with Store.open(db, readonly=True) as reader:
        assert reader.runs()
    assert side_files(db) == []


def test_a_reader_leaves_them_to_a_writer_still_at_work(tmp_path):
    db = tmp_path / "w.db"
    writer = Store.open(db)
    run_id = write_sample_run(writer)
    with open_for_reading(db) as reader:
        assert reader.run(run_id)["status"] == "finished"
    assert side_files(db) == ["w.db-shm", "w.db-wal"]
    writer.close()
    assert side_files(db) == []


def test_commands_that_read_leave_no_side_files(tmp_path):
    db = tmp_path / "c.db"
    with Store.open(db) as store:
        write_sample_run(store)
    for args in (("runs", "--db", db), ("report", "--db", db, "--format", "json")):
        proc = run_cli(*args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert side_files(db) == [], args
