"""The store: migrations, concurrent writers, refusing corrupt or foreign files untouched."""

import hashlib
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from op_db import schema as schema_mod
from op_db import store as store_mod
from op_db.errors import InputError
from op_db.records import Result, Status
from op_db.sample import result, sample_results, write_sample_run
from op_db.store import Store, open_for_reading


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_results_round_trip_with_every_field(tmp_path):
    with Store.open(tmp_path / "a.db") as store:
        run_id = write_sample_run(store)
        assert store.results(run_id) == sorted(sample_results(), key=lambda r: r.item)
        assert store.run(run_id)["simulated"] is True
        assert store.status_counts(run_id)["UNSUPPORTED"] == 2


def test_a_v1_database_is_migrated_when_a_later_migration_exists(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    with Store.open(path) as store:
        run_id = write_sample_run(store)
    monkeypatch.setattr(
        schema_mod, "MIGRATIONS",
        (*schema_mod.MIGRATIONS,
         "ALTER TABLE runs ADD COLUMN note TEXT; UPDATE runs SET note = 'migrated'",
         lambda conn: conn.execute("CREATE TABLE extra_facts (k TEXT)")),
    )
    latest = str(len(schema_mod.MIGRATIONS))
    # Read-only opening never writes: it reads a copy migrated in memory.
    before = digest(path)
    with Store.open(path, readonly=True) as store:
        assert len(store.results(run_id)) == len(sample_results())
    assert digest(path) == before
    # Reading for reports migrates a file it may write, once.
    with open_for_reading(path) as store:
        assert len(store.results(run_id)) == len(sample_results())
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM schema_info WHERE key='version'").fetchone()[0] == latest
    assert conn.execute("SELECT note FROM runs").fetchone()[0] == "migrated"
    assert conn.execute("SELECT count(*) FROM extra_facts").fetchone()[0] == 0


def test_a_newer_database_is_refused_with_one_sentence(tmp_path):
    path = tmp_path / "new.db"
    Store.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_info SET value = '99' WHERE key = 'version'")
    with pytest.raises(InputError, match="newer neuron-check"):
        Store.open(path)


@pytest.mark.parametrize(
    "content",
    [b"this is not a database at all\n" * 10,
     b"SQLite format 3\x00" + b"\xff" * 4000],
    ids=["text", "corrupt-sqlite"],
)
def test_corrupt_files_are_refused_and_left_untouched(tmp_path, content):
    path = tmp_path / "bad.db"
    path.write_bytes(content)
    before = digest(path)
    for opener in (lambda: Store.open(path), lambda: Store.open(path, readonly=True), lambda: open_for_reading(path)):
        with pytest.raises(InputError):
            opener()
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.db"]


def test_a_foreign_sqlite_file_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (name TEXT)")
        conn.execute("INSERT INTO customers VALUES ('x')")
    conn.close()
    before = digest(path)
    with pytest.raises(InputError, match="another application"):
        Store.open(path)
    assert digest(path) == before


def test_default_path_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURON_CHECK_DB", str(tmp_path / "env.db"))
    with Store.open() as store:
        store.create_run(backend="cpu", device="cpu")
    assert (tmp_path / "env.db").exists()
    monkeypatch.delenv("NEURON_CHECK_DB")
    monkeypatch.chdir(tmp_path)
    assert store_mod.default_path().name == "neuron-check.db"


def test_reading_a_missing_database_says_so(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        open_for_reading(tmp_path / "none.db")


WRITER = textwrap.dedent("""
    import sys
    from op_db.store import Store
    from op_db.sample import result
    path, name = sys.argv[1], sys.argv[2]
    with Store.open(path) as store:
        run_id = store.create_run(backend=name, device=name)
        for i in range(40):
            store.add_result(run_id, result(f"op{i}", "float32", "PASS"))
        store.finish_run(run_id)
""")


def test_several_processes_write_different_runs_at_once(tmp_path):
    path = tmp_path / "shared.db"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"w{i}"], stderr=subprocess.PIPE)
             for i in range(3)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    with open_for_reading(path) as store:
        runs = store.run_summaries()
        assert sorted(r["backend"] for r in runs) == ["w0", "w1", "w2"]
        assert all(r["counts"]["PASS"] == 40 and r["status"] == "finished" for r in runs)


def test_import_run_copies_a_run_in_one_transaction(tmp_path):
    with Store.open(tmp_path / "a.db") as store:
        run_id = store.import_run(
            {"backend": "sim", "device": "sim", "started": "2026-01-01T00:00:00+00:00", "status": "finished",
             "options": {"run_group": "g"}},
            [result("add", "float32", Status.PASS)], [("aten.add.Tensor", "direct")],
        )
        assert store.run(run_id)["options"] == {"run_group": "g"}
        assert store.coverage(run_id) == [("aten.add.Tensor", "direct")]
        assert [r.subject for r in store.results(run_id)] == ["add"]


def test_a_schema_1_database_gains_the_numerics_column(tmp_path, monkeypatch):
    path = tmp_path / "v1.db"
    with monkeypatch.context() as patch:
        patch.setattr(schema_mod, "MIGRATIONS", schema_mod.MIGRATIONS[:1])
        Store.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO runs (started, backend, device) VALUES ('2026-01-01', 'sim', 'sim')")
        conn.execute("INSERT INTO results (run_id, suite, subject, variant, dtype, mode, status) "
                     "VALUES (1, 'opinfo', 'mul', 'forward', 'bfloat16', 'eager', 'PASS')")
    with Store.open(path) as store:
        (old,) = store.results(1)
        assert old.numerics == {}
        store.add_result(1, Result("opinfo", "add", "forward", "bfloat16", "eager", "PASS",
                                   numerics={"max_ulp": 0.5, "rounding": "nearest-even"}))
        assert store.results(1)[0].numerics == {"max_ulp": 0.5, "rounding": "nearest-even"}
