"""The static dashboard, rendered by headless Chromium."""

import shutil
import subprocess

import pytest

from op_db.sample import result, sample_results, write_sample_run
from op_db.store import Store
from reports.dashboard import build_dashboard

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
INJECTED = "<script>document.title='pwned'</script>"


@pytest.fixture
def site(tmp_path):
    db = tmp_path / "nightly.db"
    with Store.open(db) as store:
        write_sample_run(store, started="2026-01-01T02:00:00+00:00")
        regressed = [r for r in sample_results() if (r.subject, r.dtype) != ("add", "float32")]
        regressed.append(result("add", "float32", "ERROR", message=f"boom {INJECTED}"))
        write_sample_run(store, regressed, started="2026-01-02T02:00:00+00:00")
    other = tmp_path / "neuron.db"
    with Store.open(other) as store:
        write_sample_run(store, backend="neuron", device="neuron", simulated=False)
    out = tmp_path / "site"
    counts = build_dashboard([db, other], out)
    assert counts == {"series": 2, "runs": 3, "ops": 9}
    return out


def test_site_layout_and_no_network(site):
    assert (site / "plotly.min.js").stat().st_size > 1_000_000
    index = (site / "index.html").read_text()
    assert '<script src="plotly.min.js">' in index
    assert "cdn" not in index.lower() and "https://" not in index
    op_page = (site / "ops" / "opinfo.add.html").read_text()
    assert "&lt;script&gt;" in op_page and INJECTED not in op_page
    assert "ERROR" in op_page and "nightly #2 (2026-01-02)" in op_page
    assert "SIMULATED" in index
    assert len(list((site / "runs").glob("*.html"))) == 2


def test_series_keep_suites_apart_and_runs_of_two_databases_distinct(tmp_path):
    from reports.dashboard import consecutive_regressions, load_series

    ops_db, models_db = tmp_path / "ops.db", tmp_path / "models.db"
    with Store.open(ops_db) as store:  # run 1: an OpInfo nightly
        write_sample_run(store, [result("add", "float32", "PASS")], started="2026-01-01T02:00:00+00:00")
        write_sample_run(store, [result("add", "float32", "MISMATCH")], started="2026-01-02T02:00:00+00:00")
    with Store.open(models_db) as store:  # also run 1: a models nightly on the same device
        write_sample_run(store, [result("llama", "float32", "PASS", suite="model")], started="2026-01-01T03:00:00+00:00")
    series = load_series([ops_db, models_db])
    assert [(s.name, [r.run["label"] for r in s.reports]) for s in series] == [
        ("sim / sim / model", ["models #1 (2026-01-01)"]),
        ("sim / sim / opinfo", ["ops #1 (2026-01-01)", "ops #2 (2026-01-02)"]),
    ]
    (pair,) = consecutive_regressions(series[1])
    assert len(pair["regressions"]) == 1 and not pair["new"] and not pair["vanished"]


def chromium_dom(page, tmp_path):
    out = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=5000",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run does)")
def test_chromium_renders_the_charts_and_shows_injected_script_as_text(site, tmp_path):
    dom = chromium_dom(site / "index.html", tmp_path)
    # Four trend charts (two series x dtype/suite), each rendered by plotly into SVG.
    assert dom.count('class="main-svg"') >= 4
    assert "<title>neuron-check nightly dashboard</title>" in dom
    assert "pwned" not in dom.split("</title>")[0]
    # The message is in the regressions table as text, escaped in the serialised DOM.
    assert "boom &lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
    op_dom = chromium_dom(site / "ops" / "opinfo.add.html", tmp_path)
    assert "<title>opinfo: add - neuron-check</title>" in op_dom
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in op_dom
