"""Results as a Hugging Face dataset: one row per result, the Parquet columns, no network."""

import json
import socket

import datasets
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from op_db.sample import result, sample_results, write_sample_run
from op_db.store import Store
from porting_cli.cli.app import main
from reports.render.hf import run_info


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Writing a dataset must never reach out: any connection attempt fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def three_runs(tmp_path):
    path = tmp_path / "nightly.db"
    timed = result("mul", "float32", "PASS", mode="compile",
                   extra={"op_time_s": 0.002, "compile": {"compile_s": 1.5, "graph_breaks": 2, "recompiles": 0}})
    with Store.open(path) as store:
        write_sample_run(store, started="2026-01-01T02:00:00+00:00")
        write_sample_run(store, sample_results()[:4], started="2026-01-02T02:00:00+00:00")
        write_sample_run(store, [timed], started="2026-01-03T02:00:00+00:00")
    return path


def test_one_run_is_one_row_per_result_with_the_parquet_columns(three_runs, tmp_path):
    out_dir, parquet = tmp_path / "ds", tmp_path / "r.parquet"
    assert cli("report", "--db", three_runs, "--run", "1", "--format", "hf", "-o", out_dir).exit_code == 0
    assert cli("report", "--db", three_runs, "--run", "1", "--format", "parquet", "-o", parquet).exit_code == 0
    dataset = datasets.load_from_disk(str(out_dir))
    assert dataset.num_rows == len(sample_results())
    assert dataset.column_names == pq.read_table(parquet).column_names
    assert sorted(zip(dataset["subject"], dataset["dtype"], dataset["status"])) == sorted(
        (r.subject, r.dtype, r.status.value) for r in sample_results())
    (run,) = run_info(dataset)
    assert run["id"] == 1 and run["simulated"] is True and run["torch_version"] == "2.13.0"


@pytest.mark.parametrize("selection", [["--runs", "1,2,3"], ["--all"]])
def test_several_runs_make_one_dataset_with_run_id(three_runs, tmp_path, selection):
    out_dir = tmp_path / "ds"
    out = cli("report", "--db", three_runs, "--format", "hf", "-o", out_dir, *selection)
    assert out.exit_code == 0, out.output
    dataset = datasets.load_from_disk(str(out_dir))
    counts = {run_id: dataset["run_id"].count(run_id) for run_id in set(dataset["run_id"])}
    assert counts == {1: len(sample_results()), 2: 4, 3: 1}
    assert [r["id"] for r in run_info(dataset)] == [1, 2, 3]


def test_performance_metrics_sit_in_the_result_rows(three_runs, tmp_path):
    out_dir = tmp_path / "ds"
    assert cli("report", "--db", three_runs, "--run", "3", "--format", "hf", "-o", out_dir).exit_code == 0
    (row,) = datasets.load_from_disk(str(out_dir)).to_list()
    assert (row["duration_s"], row["op_time_s"], row["compile_s"], row["graph_breaks"], row["recompiles"]) == (
        0.01, 0.002, 1.5, 2, 0)
    assert json.loads(row["extra"])["compile"]["graph_breaks"] == 2


def test_push_to_hub_hands_the_dataset_to_datasets(three_runs, tmp_path, monkeypatch):
    pushed = []
    monkeypatch.setattr(datasets.Dataset, "push_to_hub", lambda self, repo: pushed.append((repo, self.num_rows)))
    out = cli("report", "--db", three_runs, "--all", "--format", "hf", "-o", tmp_path / "ds",
              "--push-to-hub", "team/nightly-coverage")
    assert out.exit_code == 0, out.output
    assert pushed == [("team/nightly-coverage", len(sample_results()) + 5)]


@pytest.mark.parametrize("args, phrase", [
    (["--format", "hf"], "give -o DIR"),
    (["--format", "json", "--all"], "apply only to --format hf"),
    (["--format", "hf", "--runs", "1,9", "-o", "ds"], "run 9 does not exist"),
])
def test_bad_hf_options_are_one_sentence(three_runs, tmp_path, monkeypatch, args, phrase):
    monkeypatch.chdir(tmp_path)
    out = cli("report", "--db", three_runs, *args)
    assert out.exit_code == 2
    assert phrase in out.output and "Traceback" not in out.output
