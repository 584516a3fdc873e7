"""Nightly series: a partial run is its own series, not run vs vanished, data.json, screenshots."""

import json
import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from op_db.records import WorkItem
from op_db.sample import result, write_sample_run
from op_db.store import Store
from porting_cli.cli.app import main
from reports.dashboard import build_dashboard, consecutive_regressions, load_series
from reports.series import selection, selects

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FULL = {"suite": "opinfo", "ops": [], "exclude": [], "dtypes": ["float32", "bfloat16", "float16"],
        "grad": False, "mode": "eager", "shard": None}
OPS = ("add", "mul", "sin", "cos", "exp", "log", "tanh")
DTYPES = ("float32", "bfloat16", "float16")
NIGHTLY = "sim / sim / opinfo / dtypes=bfloat16,float16,float32"


def full_results(failing=()):
    return [result(op, dtype, "MISMATCH" if (op, dtype) in failing else "PASS") for op in OPS for dtype in DTYPES]


@pytest.fixture
def nightly(tmp_path):
    """Two 7-op x 3-dtype nightlies, then the ad-hoc `--ops mul --dtype bf16` run of the issue."""
    db = tmp_path / "nightly.db"
    with Store.open(db) as store:
        write_sample_run(store, full_results({("mul", "bfloat16"), ("exp", "float16")}),
                         started="2026-01-01T02:00:00+00:00", options=FULL)
        write_sample_run(store, full_results({("mul", "bfloat16"), ("exp", "float16"), ("tanh", "bfloat16")}),
                         started="2026-01-02T02:00:00+00:00", options=FULL)
        write_sample_run(store, [result("mul", "bfloat16", "MISMATCH")], started="2026-01-02T09:00:00+00:00",
                         options={**FULL, "ops": ["mul"], "dtypes": ["bfloat16"]})
        write_sample_run(store, full_results({("mul", "bfloat16")}), started="2026-01-03T02:00:00+00:00",
                         options=FULL)
    return db


def test_partial_run_after_a_full_one_is_its_own_series_in_data_json(nightly, tmp_path):
    out = tmp_path / "site"
    assert build_dashboard([nightly], out) == {"series": 2, "runs": 4, "ops": 7}
    data = json.loads((out / "data.json").read_text())
    by_key = {s["key"]: s for s in data["series"]}
    assert set(by_key) == {NIGHTLY, "sim / sim / opinfo / dtypes=bfloat16 ops=mul"}
    assert by_key[NIGHTLY]["selection"] == "dtypes=bfloat16,float16,float32"
    nightly_points = by_key[NIGHTLY]["points"]
    assert [p["run"] for p in nightly_points] == [1, 2, 4]
    assert [p["pass_rate"] for p in nightly_points] == [round(19 / 21, 4), round(18 / 21, 4), round(20 / 21, 4)]
    assert nightly_points[0]["counts"]["PASS"] == 19 and nightly_points[0]["started"].startswith("2026-01-01")
    (partial,) = by_key["sim / sim / opinfo / dtypes=bfloat16 ops=mul"]["points"]
    assert partial["run"] == 3 and partial["pass_rate"] == 0.0
    series = {s.name: s for s in load_series([nightly])}
    latest_pair = consecutive_regressions(series[NIGHTLY])[0]
    assert (latest_pair["before"]["id"], latest_pair["after"]["id"]) == (2, 4)
    assert not latest_pair["vanished"] and not latest_pair["not_run"] and len(latest_pair["improvements"]) == 2


def test_named_series_keeps_not_run_apart_from_vanished(tmp_path):
    db = tmp_path / "named.db"
    named = {**FULL, "series": "nightly"}
    with Store.open(db) as store:
        write_sample_run(store, full_results(), started="2026-01-01T02:00:00+00:00", options=named)
        # Another selection under the same name: mul and sin in bf16; sin's result is missing.
        write_sample_run(store, [result("mul", "bfloat16", "ERROR")], started="2026-01-02T02:00:00+00:00",
                         options={**named, "ops": ["mul", "sin"], "dtypes": ["bfloat16"]})
    (series,) = load_series([db])
    assert series.name == "nightly (sim / sim)" and len(series.reports) == 2
    (pair,) = consecutive_regressions(series)
    assert [r.item.test_id for _, r in pair["regressions"]] == ["opinfo.mul.forward.bfloat16.eager"]
    assert [r.item.test_id for r in pair["vanished"]] == ["opinfo.sin.forward.bfloat16.eager"]
    assert len(pair["not_run"]) == len(OPS) * len(DTYPES) - 2


def test_an_interrupted_run_has_not_run_items_not_vanished(tmp_path):
    db = tmp_path / "stopped.db"
    with Store.open(db) as store:
        write_sample_run(store, full_results(), started="2026-01-01T02:00:00+00:00", options=FULL)
        run_id = store.create_run(backend="sim", device="sim", simulated=True, options=FULL,
                                  started="2026-01-02T02:00:00+00:00")
        store.add_results(run_id, full_results()[:5])
        store.finish_run(run_id, status="interrupted")
    (series,) = load_series([db])
    (pair,) = consecutive_regressions(series)
    assert len(pair["not_run"]) == 16 and not pair["vanished"]


def test_selection_joins_merged_shards_and_keeps_single_shards_apart():
    assert selection(FULL) == "dtypes=bfloat16,float16,float32"
    assert selection({**FULL, "shards": ["2/2", "1/2"]}) == selection(FULL)
    assert selection({**FULL, "shard": "1/2"}) == "dtypes=bfloat16,float16,float32 shard=1/2"
    assert selection({"suite": "model", "archs": ["llama"], "dtypes": ["fp32", "bf16"], "modes": ["eager"],
                      "generate": True}) == "archs=llama dtypes=bfloat16,float32 generate=True modes=eager"


@pytest.mark.parametrize("options, item, chosen", [
    ({**FULL, "ops": ["nn.functional.*"]}, WorkItem("opinfo", "nn.functional.relu", "forward", "float32", "eager"), True),
    ({**FULL, "ops": ["mul"]}, WorkItem("opinfo", "add", "forward", "float32", "eager"), False),
    ({**FULL, "exclude": ["a*"]}, WorkItem("opinfo", "add", "forward", "float32", "eager"), False),
    (FULL, WorkItem("opinfo", "add", "forward", "float64", "eager"), False),
    (FULL, WorkItem("opinfo", "add", "forward", "float32", "compile"), False),
    (FULL, WorkItem("opinfo", "add", "backward", "float32", "eager"), False),
    ({"suite": "model", "archs": ["llama"], "dtypes": ["bf16"], "modes": ["eager"], "generate": False},
     WorkItem("model", "llama", "generate", "bfloat16", "eager"), False),
    ({}, WorkItem("opinfo", "add", "forward", "float32", "eager"), None),
])
def test_selects(options, item, chosen):
    assert selects(options, item) is chosen


def test_ops_series_option_is_stored_with_the_run(tmp_path):
    db = tmp_path / "r.db"
    out = CliRunner().invoke(main, ["ops", "--device", "sim", "--ops", "abs", "--dtype", "fp32", "--max-samples", "1",
                                    "--db", str(db), "--series", "nightly-abs"])
    assert out.exit_code == 0, out.output
    with Store.open(db) as store:
        (run,) = store.runs()
    assert run["options"]["series"] == "nightly-abs"
    (series,) = load_series([db])
    assert series.name == "nightly-abs (sim / sim)"


# -- what a person sees ----------------------------------------------------------


def chromium(page, tmp_path, *args):
    out = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--no-first-run", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=8000", *args, page.as_uri()],
        capture_output=True, text=True, timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_screenshots_of_the_dashboard_and_the_html_report(nightly, tmp_path):
    """Screenshots at 1400 px for a person to look at (kept under $NEURON_CHECK_SCREENSHOTS when set),
    and the DOM facts behind them: rendered charts, axis titles, runs in time order."""
    import os

    site = tmp_path / "site"
    build_dashboard([nightly], site)
    keep = os.environ.get("NEURON_CHECK_SCREENSHOTS")
    shots = {}
    claims = tmp_path / "vendor.csv"
    claims.write_text("PyTorch API,Status\ntorch.add,Y\ntorch.mul,Y\ntorch.sin,N\ntorch.tan,CPU_FALLBACK\n")
    report_page = tmp_path / "report.html"
    out = CliRunner().invoke(main, ["report", "--db", str(nightly), "--claims", str(claims), "--format", "html",
                                    "-o", str(report_page)])
    assert out.exit_code == 0, out.output
    for name, page in (("dashboard", site / "index.html"), ("report", report_page)):
        png = tmp_path / f"{name}.png"
        chromium(page, tmp_path, "--window-size=1400,2600", f"--screenshot={png}")
        assert png.stat().st_size > 20_000  # a rendered page, not a blank one
        shots[name] = png
        if keep:
            shutil.copy(png, os.path.join(keep, png.name))
    dom = chromium(site / "index.html", tmp_path, "--window-size=1400,2600", "--dump-dom")
    assert dom.count('class="main-svg"') >= 4
    assert dom.count("run (oldest first)") >= 4 and dom.count("pass rate (%)") >= 4
    nightly_chart = dom.split('id="chart-sim-sim-opinfo-dtypes_bfloat16_float16_float32-1"')[1].split("</svg>")[0]
    ticks = re.findall(r'class="xtick".*?data-unformatted="([^"]+)"', nightly_chart)
    assert ticks == ["#1 (2026-01-01)", "#2 (2026-01-02)", "#4 (2026-01-03)"]
