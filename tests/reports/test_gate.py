"""The release gate: exit codes for regressions, manifests and --strict."""

import json

import pytest
import yaml
from click.testing import CliRunner

from op_db.sample import result, sample_results, write_sample_run
from op_db.store import Store
from porting_cli.cli.app import main
from reports.gate import evaluate, load_manifest
from reports.model import build_report
from op_db.errors import InputError


def gate(*args):
    return CliRunner().invoke(main, ["gate", *map(str, args)])


def replaced(subject, dtype, status, **fields):
    """The sample set with one item's status changed."""
    out = [r for r in sample_results() if (r.subject, r.dtype) != (subject, dtype)]
    return [*out, result(subject, dtype, status, **fields)]


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "gate.db"
    with Store.open(path) as store:
        write_sample_run(store)  # run 1: the baseline
    return path


def add_run(db, results):
    with Store.open(db) as store:
        return write_sample_run(store, results)


def test_no_change_passes(db):
    add_run(db, sample_results())
    out = gate("--db", db, "--baseline", 1)
    assert out.exit_code == 0, out.output
    assert "gate: passed" in out.output


def test_a_regression_fails_the_gate(db):
    add_run(db, replaced("add", "float32", "MISMATCH", message="off by 0.5", failing_op="aten.add.Tensor"))
    out = gate("--db", db, "--baseline", 1, "--format", "json")
    assert out.exit_code == 1
    data = json.loads(out.stdout)
    assert data["passed"] is False
    assert [(r["subject"], r["baseline_status"], r["status"]) for r in data["regressions"]] == [
        ("add", "PASS", "MISMATCH")]


def test_a_fallback_that_now_fails_is_a_regression_and_a_fix_an_improvement():
    run = {"id": 1, "device": "sim"}
    before = build_report(run, sample_results())
    kept = [r for r in sample_results() if r.subject not in ("median", "cumprod", "erfinv")]
    after = build_report(run, [
        *kept, result("median", "float32", "ERROR"), result("cumprod", "float32", "PASS"),
        result("cumprod", "bfloat16", "UNSUPPORTED"), result("brand_new", "float32", "PASS"),
    ])
    outcome = evaluate(after, before)
    assert [c.subject for _, c in outcome.regressions] == ["median"]
    assert [c.subject for _, c in outcome.improvements] == ["cumprod"]
    assert [r.subject for r in outcome.new] == ["brand_new"]
    assert [r.subject for r in outcome.vanished] == ["erfinv"]
    assert outcome.tripped


def test_a_failure_the_manifest_expects_passes_and_an_unexpected_one_fails(db, tmp_path):
    manifest = tmp_path / "xfail.yaml"
    assert gate("--db", db, "--write-expected", manifest).exit_code == 0
    data = yaml.safe_load(manifest.read_text())
    assert data["schema"] == 1 and data["device"] == "sim" and len(data["expected_failures"]) == 6
    add_run(db, sample_results())
    assert gate("--db", db, "--baseline", 1, "--expected-failures", manifest).exit_code == 0
    add_run(db, [*sample_results(), result("brand_new", "float32", "ERROR", message="new bug")])
    out = gate("--db", db, "--baseline", 1, "--expected-failures", manifest)
    assert out.exit_code == 1
    assert "opinfo.brand_new.forward.float32.eager ERROR: new bug" in out.output


def test_an_expected_failure_that_now_passes_fails_only_with_strict(db, tmp_path):
    manifest = tmp_path / "xfail.yaml"
    manifest.write_text(yaml.safe_dump({"schema": 1, "device": "sim", "expected_failures": [
        {"subject": "cum*", "status": "UNSUPPORTED", "reason": "no kernel yet"},
        {"suite": "opinfo", "subject": "atan2"}, {"subject": "erfinv"}, {"subject": "mul", "dtype": "bfloat16"},
        {"suite": "model", "subject": "*"},
    ]}))
    fixed = [r for r in sample_results() if r.subject != "cumprod"] + [
        result("cumprod", "float32", "PASS"), result("cumprod", "bfloat16", "PASS")]
    add_run(db, fixed)
    relaxed = gate("--db", db, "--baseline", 1, "--expected-failures", manifest)
    assert relaxed.exit_code == 0, relaxed.output
    assert "expected failures that now pass: 2" in relaxed.output
    assert gate("--db", db, "--baseline", 1, "--expected-failures", manifest, "--strict").exit_code == 1


def test_a_failure_with_another_status_than_expected_fails(db, tmp_path):
    manifest = tmp_path / "xfail.yaml"
    gate("--db", db, "--write-expected", manifest)
    add_run(db, replaced("mul", "bfloat16", "CRASH"))
    out = gate("--db", db, "--expected-failures", manifest)
    assert out.exit_code == 1
    assert "(manifest: MISMATCH)" in out.output


def test_the_baseline_may_be_a_json_export(db, tmp_path):
    export = tmp_path / "baseline.json"
    assert CliRunner().invoke(main, ["report", "--db", str(db), "--format", "json", "-o", str(export)]).exit_code == 0
    add_run(db, replaced("add", "float32", "ERROR"))
    assert gate("--db", db, "--baseline", export).exit_code == 1
    assert gate("--db", db, "--baseline", export, "--current", 1).exit_code == 0


@pytest.mark.parametrize("text, match", [
    ("expected_failures: []", "schema"),
    ("schema: 1\nexpected_failures: [{dtype: float32}]", "subject"),
    ("schema: 1\nexpected_failures: [{subject: add, colour: red}]", "unknown key"),
    ("schema: 1\nexpected_failures: [{subject: add, status: PASS}]", "status"),
    ("schema: 1\nexpected_failures: [unclosed", "not valid YAML"),
])
def test_bad_manifests_are_one_sentence_errors(tmp_path, text, match):
    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=match):
        load_manifest(path)


def test_gate_usage_errors_exit_2(db, tmp_path):
    assert gate("--db", db).exit_code == 2
    out = gate("--db", db, "--baseline", tmp_path / "missing.json")
    assert out.exit_code == 2 and "Traceback" not in out.output
