"""The porting report without running scripts: verdict rules, JSON keys, SARIF structure,
HTML escaping, --fix/--diff, bad input, --static-only start-up, --against from a stored run."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from op_db.records import Result, Status
from op_db.store import Store
from porting_cli.cli.port_report import build_report, exit_code
from porting_cli.analysis.scan import scan_source
from porting_cli.runtime.trace import OpUse, Prediction, TraceResult, read_records
from reports.render.porting import render
from reports.render.sarif import porting_sarif

SCRIPTS = Path(__file__).parent / "scripts"
REPO = Path(__file__).resolve().parents[2]

CLEAN = "import torch\nx = torch.ones(2)\nprint(x.sum())\n"
CUDA = "import torch\nx = torch.ones(2).cuda()\n"
FLASH = "import torch\nimport cupy\nx = torch.ones(2)\n"  # a CUDA-only library with no replacement


def trace(*uses, errors=(), fallbacks=None, outcome="finished", exception=None) -> TraceResult:
    return TraceResult(script="s.py", device="sim", backend="sim", simulated=True, outcome=outcome,
                       uses=[OpUse(op, ("float32",), site, n) for op, site, n in uses], errors=list(errors),
                       fallbacks=fallbacks or {}, exception=exception)


def report_for(source, tr=None, **kwargs) -> dict:
    return build_report("s.py", scan_source(source, "s.py"), "", tr, **kwargs).to_dict()


UNSUPPORTED_NORM = {"op": "aten.native_layer_norm.default", "dtypes": ["float32"], "site": "s.py:7",
                    "status": "UNSUPPORTED", "message": "Could not run 'aten::native_layer_norm' <b>"}


@pytest.mark.parametrize("source, tr, verdict", [
    (CLEAN, trace(("aten.add.Tensor", "s.py:2", 3)), "ready"),
    (CLEAN, None, "ready"),
    (CUDA, trace(("aten._to_copy.default", "s.py:2", 1)), "ready-with-fixes"),
    (CLEAN, trace(("aten.median.default", "s.py:2", 1), fallbacks={"aten.median.default": 1}), "ready-with-fixes"),
    (CLEAN, trace(("aten.add.Tensor", "s.py:2", 1), errors=[UNSUPPORTED_NORM], outcome="raised"), "blocked"),
    (FLASH, trace(("aten.add.Tensor", "s.py:3", 1)), "blocked"),
    (CLEAN, trace(outcome="raised", exception={"type": "ValueError", "message": "m", "site": "s.py:3"}), "blocked"),
    (CLEAN, trace(("aten.add.Tensor", "s.py:2", 1), outcome="exit"), "ready"),
])
def test_verdict_rules(source, tr, verdict):
    assert report_for(source, tr)["verdict"] == verdict


def test_blocked_report_names_op_site_and_effort():
    report = report_for(CLEAN, trace(("aten.addmm.default", "s.py:6", 2), errors=[UNSUPPORTED_NORM], outcome="raised"))
    assert report["reasons"] == [
        "C1: aten.native_layer_norm.default is UNSUPPORTED (on the target) at s.py:7: the backend needs "
        "a kernel for it, or the model a composite of supported ops",
        "1 change item: 1 to change by hand (C1)"]
    assert report["blocked_by"] == ["C1"] and report["items"][0]["kind"] == "op"
    first = report["ops"][0]
    assert (first["op"], first["status"], first["sites"], first["count"]) == (
        "aten.native_layer_norm.default", "UNSUPPORTED", ["s.py:7"], 1)
    assert report["effort"]["overall"] == "high" and report["effort"]["blocking_ops"] == 1


def test_json_schema_keys_from_the_cli(tmp_path):
    shutil.copy(SCRIPTS / "exits.py", tmp_path / "exits.py")
    out = subprocess.run([sys.executable, "-m", "porting_cli", "exits.py", "--static-only", "--format", "json"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert {"verdict", "effort", "findings", "ops", "remapped", "patch", "runtime", "reasons"} <= set(report)
    assert report["runtime"] is None and report["ops"] == [] and report["verdict"] == "ready-with-fixes"
    finding = report["findings"][0]
    assert {"rule", "path", "line", "col", "severity", "effort", "message", "fixable"} <= set(finding)
    assert (finding["path"], finding["line"]) == ("exits.py", 6)
    assert {"overall", "findings", "fixable", "hours"} <= set(report["effort"])
    assert report["patch"].startswith("--- a/exits.py\n+++ b/exits.py\n")


def test_op_rows_have_the_documented_keys():
    row = report_for(CLEAN, trace(("aten.add.Tensor", "s.py:2", 3)))["ops"][0]
    assert {"op", "count", "status", "sites", "dtypes", "source", "predicted", "message"} <= set(row)


def check_sarif(log: dict) -> None:
    """The parts of the SARIF 2.1.0 schema GitHub code scanning relies on, checked by hand."""
    assert isinstance(log["$schema"], str) and "sarif" in log["$schema"]
    assert log["version"] == "2.1.0"
    assert isinstance(log["runs"], list) and len(log["runs"]) == 1
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert isinstance(driver["name"], str) and driver["name"]
    ids = []
    for rule in driver["rules"]:
        assert isinstance(rule["id"], str) and rule["id"]
        assert isinstance(rule["shortDescription"]["text"], str) and rule["shortDescription"]["text"]
        assert isinstance(rule["help"]["text"], str)
        assert rule["defaultConfiguration"]["level"] in ("none", "note", "warning", "error")
        ids.append(rule["id"])
    assert len(ids) == len(set(ids))
    for result in run["results"]:
        assert result["ruleId"] in ids and ids[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in ("none", "note", "warning", "error")
        assert isinstance(result["message"]["text"], str) and result["message"]["text"]
        location = result["locations"][0]["physicalLocation"]
        uri = location["artifactLocation"]["uri"]
        assert isinstance(uri, str) and not uri.startswith("/") and "\\" not in uri
        region = location["region"]
        assert isinstance(region["startLine"], int) and region["startLine"] >= 1
        assert isinstance(region["startColumn"], int) and region["startColumn"] >= 1


def test_sarif_has_findings_and_unsupported_ops_at_their_lines():
    report = report_for(CUDA, trace(("aten.add.Tensor", "s.py:2", 1), errors=[UNSUPPORTED_NORM], outcome="raised"))
    log = porting_sarif(report)
    check_sarif(log)
    by_rule = {r["ruleId"]: r for r in log["runs"][0]["results"]}
    finding = by_rule["NC101"]["locations"][0]["physicalLocation"]
    assert (finding["artifactLocation"]["uri"], finding["region"]["startLine"], finding["region"]["startColumn"]) == ("s.py", 2, 19)  # the region starts at the CUDA token (`.cuda`)
    op = by_rule["NCOP1"]
    assert op["level"] == "error" and op["message"]["text"].startswith("aten.native_layer_norm.default is UNSUPPORTED on sim")
    assert op["locations"][0]["physicalLocation"]["region"]["startLine"] == 7


def test_sarif_from_the_cli_on_an_example(tmp_path):
    out_file = tmp_path / "port.sarif"
    out = subprocess.run([sys.executable, "-m", "porting_cli", "examples/gpt_amp_train.py", "--static-only",
                          "--format", "sarif", "-o", str(out_file)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    log = json.loads(out_file.read_text())
    check_sarif(log)
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in log["runs"][0]["results"]}
    assert uris == {"examples/gpt_amp_train.py"}


def test_html_escapes_untrusted_text():
    exc = {"type": "ValueError", "message": "<script>alert(1)</script>", "site": "s.py:3", "user_traceback": []}
    report = report_for(CLEAN, trace(errors=[UNSUPPORTED_NORM], outcome="raised", exception=exc))
    html = render(report, "html")
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "native_layer_norm&#39; &lt;b&gt;" in html


@pytest.mark.parametrize("fmt", ["table", "md"])
def test_text_formats_show_verdict_ops_and_findings(fmt):
    text = render(report_for(CUDA, trace(("aten.add.Tensor", "s.py:2", 1), errors=[UNSUPPORTED_NORM], outcome="raised")), fmt)
    assert "BLOCKED" in text and "aten.native_layer_norm.default" in text and "NC101" in text


@pytest.mark.parametrize("verdict, fail_on, code", [
    ("blocked", "blocked", 1), ("ready-with-fixes", "blocked", 0), ("ready-with-fixes", "fixes", 1),
    ("ready", "fixes", 0), ("blocked", None, 0),
])
def test_fail_on(verdict, fail_on, code):
    assert exit_code(verdict, fail_on) == code


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "porting_cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_diff_prints_the_patch_and_fix_rewrites_keeping_orig(tmp_path):
    script = tmp_path / "exits.py"
    shutil.copy(SCRIPTS / "exits.py", script)
    original = script.read_text()
    diff = cli("exits.py", "--diff", cwd=tmp_path)
    assert diff.returncode == 0 and diff.stdout.startswith("--- a/exits.py")
    assert '-x = torch.ones(3).to("cuda:0") + 1' in diff.stdout and script.read_text() == original
    fixed = cli("exits.py", "--fix", cwd=tmp_path)
    assert fixed.returncode == 0 and "exits.py.orig" in fixed.stdout
    assert (tmp_path / "exits.py.orig").read_text() == original
    assert '"cuda:0"' not in script.read_text()
    assert cli("exits.py", "--diff", cwd=tmp_path).stdout == ""


@pytest.mark.parametrize("make, expected", [
    (lambda d: "missing.py", "missing.py: no such file."),
    (lambda d: (d / "pkg.py").mkdir() or "pkg.py", "pkg.py is a directory"),
    (lambda d: (d / "bad.py").write_text("x = 1\ndef f(:\n") and "bad.py", "bad.py:2: syntax error"),
    (lambda d: (d / "latin.py").write_bytes(b"# caf\xe9\n") and "latin.py", "latin.py is not UTF-8"),
])
def test_bad_input_is_one_sentence_and_exit_2(tmp_path, make, expected):
    out = cli(make(tmp_path), cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith(f"neuron-check: error: {expected}") and out.stderr.count("\n") == 1


def test_static_only_does_not_import_torch():
    probe = ("import sys\nfrom porting_cli.cli.app import main\n"
             "try:\n    main(['examples/gpt_amp_train.py', '--static-only', '--format', 'json', '-o', '/dev/null'])\n"
             "except SystemExit as e:\n    assert e.code == 0, e.code\n"
             "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "NO-TORCH", out.stdout + out.stderr


def test_against_a_stored_run_predicts_from_its_results(tmp_path):
    with Store.open(tmp_path / "nc.db") as store:
        run = store.create_run(backend="sim", device="sim")
        store.add_result(run, Result("opinfo", "cumprod", "forward", "float32", "eager", Status.UNSUPPORTED,
                                     failing_op="aten.cumprod.default"))
        store.add_result(run, Result("opinfo", "median", "forward", "float32", "eager", Status.FALLBACK,
                                     fallback_ops=["aten.median.default"], aten_ops={"aten.median.default": 1}))
        store.add_result(run, Result("opinfo", "add", "forward", "float32", "eager", Status.PASS,
                                     aten_ops={"aten.add.Tensor": 1}))
    prediction = Prediction.load(str(run), str(tmp_path / "nc.db"))
    assert [prediction.status_of(op) for op in ("aten.cumprod.default", "aten.median.default", "aten.add.Tensor",
                                                "aten.sort.default")] == ["UNSUPPORTED", "FALLBACK", "ran", "untested"]


def test_records_with_a_truncated_last_line_give_a_partial_result(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(
        '{"kind": "start", "device": "sim", "backend": "sim", "simulated": true, "versions": {}}\n'
        '{"kind": "op", "op": "aten.sin.default", "dtypes": ["float32"], "site": "e.py:6"}\n'
        '{"kind": "counts", "uses": [["aten.sin.default", ["float32"], "e.py:6", 41]]}\n'
        '{"kind": "op", "op": "aten.cos.default", "dtypes": ["float32"], "site": "e.py:7"}\n'
        '{"kind": "counts", "uses": [["aten.sin.def')
    result = read_records(str(path), "e.py")
    assert result.outcome == "running"  # no end record: the caller decides how it ended
    assert {(u.op, u.site, u.count) for u in result.uses} == {("aten.sin.default", "e.py:6", 41),
                                                              ("aten.cos.default", "e.py:7", 1)}
