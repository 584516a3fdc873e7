"""The store-reading commands end to end: runs, report, merge, coverage, profile, dashboard."""

import hashlib
import json
import sqlite3
import xml.etree.ElementTree as ET

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from op_db.sample import sample_results, write_sample_run
from op_db.store import Store
from porting_cli.cli.app import main


def cli(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "results.db"
    with Store.open(path) as store:
        write_sample_run(store)
    return path


def test_runs_lists_counts_and_simulated(db):
    out = cli("runs", "--db", db)
    assert out.exit_code == 0, out.output
    assert "UNSUPPORTED" in out.output and "yes" in out.output
    data = json.loads(cli("runs", "--db", db, "--format", "json").stdout)
    (run,) = data["runs"]
    assert run["simulated"] is True and run["counts"]["PASS"] == 4


def test_db_comes_from_the_environment(db):
    out = cli("runs", env={"NEURON_CHECK_DB": str(db)})
    assert out.exit_code == 0 and "sim" in out.output


@pytest.mark.parametrize("fmt", ["table", "md", "html", "json", "junit", "parquet"])
def test_report_writes_every_format_to_a_file(db, tmp_path, fmt):
    target = tmp_path / f"report.{fmt}"
    out = cli("report", "--db", db, "--run", "latest", "--format", fmt, "-o", target)
    assert out.exit_code == 0, out.output
    rows = len(sample_results())
    if fmt == "json":
        assert len(json.loads(target.read_text())["results"]) == rows
    elif fmt == "junit":
        assert len(ET.parse(target).getroot().findall(".//testcase")) == rows
    elif fmt == "parquet":
        assert pq.read_table(target).num_rows == rows
    else:
        assert "SIMULATED" in target.read_text()


@pytest.mark.parametrize("content", [b"not a database" * 50, b"SQLite format 3\x00" + b"\x00\x13" * 3000])
@pytest.mark.parametrize("command", [["runs"], ["report"], ["gate", "--baseline", "1"], ["profile", "export", "-o", "p.json"]])
def test_corrupt_database_is_one_sentence_exit_2_and_unchanged(tmp_path, content, command):
    bad = tmp_path / "bad.db"
    bad.write_bytes(content)
    out = cli(*command, "--db", bad)
    assert out.exit_code == 2
    assert "Traceback" not in out.output and out.output.count("\n") == 1
    assert bad.read_bytes() == content


def test_merge_rejects_a_foreign_database_untouched(db, tmp_path):
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    before = hashlib.sha256(foreign.read_bytes()).hexdigest()
    out = cli("merge", db, foreign, "-o", tmp_path / "out.db")
    assert out.exit_code == 2 and "another application" in out.output
    assert hashlib.sha256(foreign.read_bytes()).hexdigest() == before
    assert not (tmp_path / "out.db").exists()


def test_merge_command(db, tmp_path):
    other = tmp_path / "other.db"
    with Store.open(other) as store:
        write_sample_run(store, backend="neuron", device="neuron", simulated=False)
    out = cli("merge", db, other, "-o", tmp_path / "out.db")
    assert out.exit_code == 0, out.output
    assert out.output.count("results from 1 shard") == 2


def test_report_of_a_missing_run_is_exit_2(db):
    out = cli("report", "--db", db, "--run", "7")
    assert out.exit_code == 2 and "run 7 does not exist" in out.output


def test_profile_export(db, tmp_path):
    target = tmp_path / "profile.json"
    out = cli("profile", "export", "--db", db, "-o", target)
    assert out.exit_code == 0, out.output
    assert json.loads(target.read_text())["unsupported_ops"] == ["aten.cumprod.default"]


def test_coverage_command_on_meta():
    out = cli("coverage", "--device", "meta", "--format", "json", "--kind", "fallback")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["dispatch_key"] == "Meta" and data["simulated"] is False
    assert data["summary"]["fallback"] == len(data["ops"]) > 0
    assert cli("coverage", "--device", "meta", "--kind", "nonsense").exit_code == 2


def test_dashboard_command(db, tmp_path):
    out = cli("dashboard", "--db", db, "-o", tmp_path / "site")
    assert out.exit_code == 0, out.output
    assert (tmp_path / "site" / "index.html").exists()


def test_report_ranks_blockers_by_a_zoo_census(db, tmp_path):
    census = tmp_path / "census.json"
    census.write_text(json.dumps({"schema": 2, "models": [
        {"subject": s, "ops": ["aten.cumprod.default", "aten.mul.Tensor"]} for s in ("llama", "gpt2", "t5")]}))
    out = cli("report", "--db", db, "--zoo", census)
    assert out.exit_code == 0, out.output
    assert "Aten overloads that block the most models" in out.output and "zoo models using it" in out.output
    census.write_text("[1, 2]")
    bad = cli("report", "--db", db, "--zoo", census)
    assert bad.exit_code == 2 and "not a zoo census" in bad.output and "Traceback" not in bad.output
