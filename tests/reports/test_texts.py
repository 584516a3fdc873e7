"""What a person reads is cut at word boundaries, counts agree with their nouns, every written
file is announced, and database advice names only flags the command has (issue 31, item 11)."""

import pytest
from click.testing import CliRunner

from op_db.sample import result, sample_results, write_sample_run
from op_db.store import Store
from op_db.text import cut, plural
from porting_cli.cli.app import main

# A mismatch text whose 120th character falls inside a figure.
NUMBERS = ("sample 0: max abs err 0.015625 at index (3, 1); rmse vs float64 oracle 0.00442 "
           "exceeds 2 x CPU's 0.0001231 (worst of 3 samples, bfloat16 output of aten.mul.Tensor)")


def invoke(*args):
    return CliRunner().invoke(main, [*map(str, args)])


@pytest.mark.parametrize("limit", [20, 33, 60, 100, 119, 120, 121, 160])
def test_cut_keeps_whole_words(limit):
    text = cut(NUMBERS, limit)
    assert len(text) <= limit and text.endswith("...")
    kept = text[:-3].split()
    assert kept == NUMBERS.split()[:len(kept)]  # every word kept whole, in order


def test_cut_leaves_short_text_alone_and_splits_only_a_word_with_no_boundary():
    assert cut("0.5 ulp", 20) == "0.5 ulp"
    assert cut("x" * 30, 10) == "xxxxxxx..."


def test_plural():
    assert [plural(n, "item") for n in (0, 1, 2)] == ["0 items", "1 item", "2 items"]
    assert plural(1, "series", "series") == "1 series" and plural(3, "series", "series") == "3 series"


@pytest.fixture
def regressed_db(tmp_path):
    path = tmp_path / "gate.db"
    with Store.open(path) as store:
        write_sample_run(store)
        others = [r for r in sample_results() if (r.subject, r.dtype) != ("add", "float32")]
        write_sample_run(store, [*others, result("add", "float32", "MISMATCH", message=NUMBERS)])
    return path


def test_gate_text_cut_at_a_word(regressed_db):
    out = invoke("gate", "--db", regressed_db, "--baseline", 1)
    assert out.exit_code == 1
    line = next(line for line in out.output.splitlines() if "add" in line and "was PASS" in line)
    message = line.split("(was PASS): ", 1)[1]
    assert message == cut(NUMBERS, 120)
    assert message.endswith("0.0001231 (worst of...")


def test_dashboard_text_cut_at_a_word_and_one_slash(regressed_db, tmp_path):
    out = invoke("dashboard", "--db", regressed_db, "-o", f"{tmp_path}/site/")
    assert out.exit_code == 0, out.output
    assert out.output.strip() == f"wrote {tmp_path}/site/index.html: 1 series, 2 runs, 9 op pages"
    index = (tmp_path / "site" / "index.html").read_text()
    assert f"({cut(NUMBERS, 160)})".replace("'", "&#39;") in index
    assert "0.)" not in index


@pytest.mark.parametrize("fmt,suffix", [("table", "txt"), ("md", "md"), ("html", "html"), ("json", "json"),
                                        ("junit", "xml"), ("parquet", "parquet")])
def test_report_output_says_what_it_wrote(sample_db, tmp_path, fmt, suffix):
    target = tmp_path / f"r.{suffix}"
    out = invoke("report", "--db", sample_db, "--format", fmt, "-o", target)
    assert out.exit_code == 0, out.output
    assert out.output.strip() == f"wrote {target}: {fmt} report of run 1"
    assert target.stat().st_size > 0


def test_one_item_is_not_items(tmp_path, capsys):
    from conformance.engine.config import RunConfig
    from conformance.engine.local import Executor
    from op_db.records import Result, Status, WorkItem
    from porting_cli.cli.options import run_and_report

    class Instant(Executor):
        def execute(self, work, config, emit):
            for item in work:
                emit(Result.for_item(item, Status.PASS, duration_s=0.1))

    class Sim:
        simulated = True

    with Store.open(tmp_path / "r.db") as store:
        run_id = store.create_run(backend="sim", device="sim")
        code = run_and_report(store, [WorkItem("opinfo", "add", "forward", "float32", "eager")],
                              RunConfig(backend="sim", device="sim"), Sim(), run_id, command_name="ops",
                              junit_path=None, failing_statuses=set(), strict_fallback=False, executor=Instant())
    assert code == 0
    assert capsys.readouterr().err == "run 1: 1 item on sim (simulated), 1 job\n"


def test_merge_advice_names_its_own_arguments(tmp_path):
    missing = tmp_path / "missing.db"
    out = invoke("merge", missing, "-o", tmp_path / "out.db")
    assert out.exit_code == 2
    assert out.output.strip() == (f"neuron-check: error: database {missing} does not exist; "
                                  "run `neuron-check ops` first or name another input.")
    assert "--db" not in out.output


def test_a_database_in_a_folder_that_refuses_files_is_one_sentence(regressed_db):
    """/proc passes access() for root, yet SQLite cannot create a file there: exit 2, not 3."""
    out = invoke("merge", regressed_db, "-o", "/proc/x.db")
    assert out.exit_code == 2
    line = out.output.strip()
    # As root: SQLite's own refusal; as anyone else the folder check says /proc is read-only first.
    assert line in ("neuron-check: error: cannot create database /proc/x.db (unable to open database file); "
                    "give -o another file.",
                    "neuron-check: error: cannot create database /proc/x.db: the folder /proc is read-only; "
                    "give -o another file.")
