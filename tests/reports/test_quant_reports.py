"""`neuron-check gate` and `dashboard` read the quant suite's results like any suite's: two real
quant runs on sim (fault-free, then an int32 matmul fault) are a gate regression and a series."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

pytest.importorskip("torchao")

from porting_cli.cli.app import main  # noqa: E402

SELECTION = ["--device", "sim", "--dtype", "fp32", "--recipe", "int8_weight_only,int8_dynamic_int8_weight",
             "--target", "linear.g64", "-j", "1"]
INT_MM_FAULT = {"faults": [{"op": "aten.mm.default", "dtype": "int32", "kind": "offset", "value": 1}]}


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def quant_db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("quant")
    db, profile = folder / "quant.db", folder / "int-mm.json"
    profile.write_text(json.dumps(INT_MM_FAULT))
    baseline = cli("quant", *SELECTION, "--db", db)
    assert baseline.exit_code == 0, baseline.output
    faulted = cli("quant", *SELECTION, "--db", db, "--sim-profile", profile)
    assert faulted.exit_code == 0, faulted.output
    return db


def test_gate_finds_the_quant_regression(quant_db):
    out = cli("gate", "--db", quant_db, "--baseline", 1, "--format", "json")
    assert out.exit_code == 1, out.output
    data = json.loads(out.stdout)
    assert [(r["suite"], r["subject"], r["baseline_status"], r["status"]) for r in data["regressions"]] == [
        ("quant", "int8_dynamic_int8_weight", "PASS", "MISMATCH")]


def test_dashboard_shows_a_quant_series(quant_db, tmp_path):
    from reports.dashboard import consecutive_regressions, load_series

    (series,) = load_series([quant_db])
    assert series.name.startswith("sim / sim / quant") and len(series.reports) == 2
    (pair,) = consecutive_regressions(series)
    assert len(pair["regressions"]) == 1
    out = cli("dashboard", "--db", quant_db, "-o", tmp_path / "site")
    assert out.exit_code == 0, out.output
    pages = sorted(p.name for p in (tmp_path / "site" / "ops").glob("quant.*.html"))
    assert pages and any("int8_dynamic_int8_weight" in p for p in pages), pages
    assert "MISMATCH" in next(p for p in (tmp_path / "site" / "ops").glob("quant.int8_dynamic*.html")).read_text()
