"""The static nightly dashboard: latest coverage, trends, regressions, one page per op.

Runs from one or more databases are grouped into series (`reports.series`:
backend, device, suites run and selection, or an explicit `--series NAME`) and
ordered by start time: a nightly `ops` run, a nightly `models` run and an
ad-hoc `ops --ops mul` run on one device are three series, so trends and
consecutive-run regressions compare like with like. `data.json` holds every
series' points for other tools. The site is plain files: `index.html`, one page per
op under `ops/`, the latest full report of each series under `runs/`, and
plotly's own JS (`plotly.min.js`, from the installed plotly package) beside
them, so it works from disk or any static host with no network.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from op_db.errors import InputError
from op_db.records import FAILING, STATUS_ORDER, WORKING, Result, Status
from reports.gate import evaluate
from reports.model import Report, build_report, pass_rate
from reports.series import SeriesKey, series_key, split_missing

REGRESSION_PAIRS = 10  # consecutive-run comparisons shown per series
_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclasses.dataclass
class Series:
    key: SeriesKey
    reports: list[Report]  # oldest first

    @property
    def name(self) -> str:
        return self.key.label

    @property
    def backend(self) -> str:
        return self.key.backend

    @property
    def device(self) -> str:
        return self.key.device

    @property
    def suites(self) -> str:
        return self.key.suites or "+".join(sorted({r.suite for rep in self.reports for r in rep.results}))

    @property
    def selection(self) -> str:
        return self.key.selection

    @property
    def slug(self) -> str:
        return _SLUG.sub("_", self.name.replace(" / ", "-"))

    @property
    def simulated(self) -> bool:
        return any(r.simulated for r in self.reports)


def load_series(db_paths: list[str | Path]) -> list[Series]:
    from op_db.store import open_for_reading

    grouped: dict[SeriesKey, list[Report]] = defaultdict(list)
    for path in db_paths:
        with open_for_reading(path) as store:
            for run in store.runs():
                report = build_report(run, store.results(run["id"]), store.coverage(run["id"]))
                # Run ids restart in every database: name the database when there are several.
                prefix = f"{Path(path).stem} " if len(db_paths) > 1 else ""
                report.run["label"] = f"{prefix}#{run['id']} ({(run.get('started') or '')[:10]})"
                suites = "+".join(sorted({r.suite for r in report.results})) or "empty"
                report.run["db"] = str(path)
                grouped[series_key(run, suites)].append(report)
    if not grouped:
        raise InputError("the databases hold no runs; nothing to show.")
    return [
        Series(key, sorted(reports, key=lambda r: (r.run.get("started") or "", r.run["id"])))
        for key, reports in sorted(grouped.items(), key=lambda kv: kv[0].label)
    ]


def trend_figure(series: Series, by: str) -> dict[str, Any]:
    """Plotly figure (plain dict) of pass rate per dtype or per suite over the series' runs."""
    traces: dict[str, dict[str, list]] = defaultdict(lambda: {"x": [], "y": [], "text": []})
    for report in series.reports:
        for row in report.pass_rates:
            if row["pass_rate"] is None:
                continue
            if by == "dtype" and row["dtype"] == "all":
                continue
            if by == "suite" and row["dtype"] != "all":
                continue
            name = row["dtype"] if by == "dtype" else row["suite"]
            if by == "dtype":
                name = f"{row['suite']} {name}"
            trace = traces[name]
            trace["x"].append(report.run["label"])
            trace["y"].append(round(row["pass_rate"] * 100, 2))
            trace["text"].append(report.run["label"])
    return {
        "data": [{"type": "scatter", "mode": "lines+markers", "name": name, **t} for name, t in sorted(traces.items())],
        "layout": {
            # The section heading names the series; a short left title keeps clear of plotly's toolbar.
            "title": {"text": f"pass rate per {by}", "x": 0.01, "xanchor": "left"},
            "yaxis": {"title": {"text": "pass rate (%)"}, "range": [-4, 104], "dtick": 20, "zeroline": False},
            "showlegend": True,
            # Categories, not times: nightly runs are evenly spaced events, and one run
            # on a time axis gets sub-second ticks.
            # categoryarray pins time order even when a trace lacks the first runs.
            "xaxis": {"type": "category", "title": {"text": "run (oldest first)"}, "automargin": True,
                      "categoryorder": "array", "categoryarray": [r.run["label"] for r in series.reports]},
            "legend": {"orientation": "h", "y": -0.3},
            "height": 340, "margin": {"l": 60, "r": 20, "t": 50, "b": 60},
        },
    }


def consecutive_regressions(series: Series) -> list[dict[str, Any]]:
    """Gate comparisons of each run with the one before it, newest first."""
    pairs = list(zip(series.reports, series.reports[1:]))[-REGRESSION_PAIRS:]
    rows = []
    for before, after in reversed(pairs):
        outcome = evaluate(after, before)  # regressions and improvements: items both runs hold
        not_run, vanished = split_missing(before.run, after.run, outcome.vanished)
        rows.append({"before": before.run, "after": after.run, "regressions": outcome.regressions,
                     "improvements": outcome.improvements, "new": outcome.new, "vanished": vanished,
                     "not_run": not_run})
    return rows


def op_histories(series_list: list[Series]) -> dict[tuple[str, str], dict[str, Any]]:
    """(suite, subject) -> {slug, rows: per series and item, the status in every run}."""
    ops: dict[tuple[str, str], dict[str, Any]] = {}
    for series in series_list:
        for index, report in enumerate(series.reports):
            for r in report.results:
                entry = ops.setdefault((r.suite, r.subject), {"items": {}, "latest": {}})
                key = (series.name, r.variant, r.dtype, r.mode)
                entry["items"].setdefault(key, {})[index] = r
                entry["latest"][key] = r
    slugs: set[str] = set()
    for (suite, subject), entry in sorted(ops.items()):
        slug = _SLUG.sub("_", f"{suite}.{subject}")
        while slug.lower() in slugs:  # case-insensitive file systems
            slug += "_"
        slugs.add(slug.lower())
        entry["slug"] = slug
        latest = list(entry["latest"].values())
        entry["working"] = sum(r.status in WORKING for r in latest)
        entry["failing"] = sum(r.status in FAILING for r in latest)
    return ops


def build_dashboard(db_paths: list[str | Path], out_dir: str | Path) -> dict[str, int]:
    """Write the site; returns counts of what was written."""
    from reports.render.html import render_html, render_page

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} exists and is not a folder.")
    series_list = load_series(db_paths)
    ops = op_histories(series_list)
    for sub in ("ops", "runs"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    _write_plotly(out / "plotly.min.js")
    latest_pages = {}
    for series in series_list:
        latest = series.reports[-1]
        page = f"runs/{series.slug}-{latest.run['id']}.html"
        (out / page).write_text(render_html(latest), encoding="utf-8")
        latest_pages[series.slug] = page
    charts = {
        series.slug: [trend_figure(series, "dtype"), trend_figure(series, "suite")] for series in series_list
    }
    generated = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    index = render_page(
        "dashboard.html.j2", series_list=series_list, charts=charts, ops=ops, latest_pages=latest_pages,
        regressions={s.slug: consecutive_regressions(s) for s in series_list},
        shown_statuses=[st.value for st in STATUS_ORDER
                        if any(s.reports[-1].summary[st.value] for s in series_list)],
        generated=generated,
        sources=[str(p) for p in db_paths],
    )
    (out / "index.html").write_text(index, encoding="utf-8")
    (out / "data.json").write_text(json.dumps(series_data(series_list), indent=1) + "\n", encoding="utf-8")
    for (suite, subject), entry in ops.items():
        page = render_page("op.html.j2", suite=suite, subject=subject, entry=entry,
                           series_list=series_list, generated=generated)
        (out / "ops" / f"{entry['slug']}.html").write_text(page, encoding="utf-8")
    return {"series": len(series_list), "runs": sum(len(s.reports) for s in series_list), "ops": len(ops)}


def series_data(series_list: list[Series]) -> dict[str, Any]:
    """data.json: every series and its points, oldest first, for other tools."""
    return {"series": [{
        "key": series.key.label, **series.key.to_json(),
        "points": [{"run": r.run.get("id"), "db": r.run.get("db"), "label": r.run.get("label"),
                    "started": r.run.get("started"), "status": r.run.get("status"),
                    "pass_rate": pass_rate(Counter({Status(s): n for s, n in r.summary.items()})),
                    "counts": r.summary} for r in series.reports],
    } for series in series_list]}


def _write_plotly(path: Path) -> None:
    """plotly's bundled JS from the installed package: the site never reaches a CDN."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise InputError("the dashboard needs plotly: pip install 'neuron-check[dashboard]'.") from None
    path.write_text(get_plotlyjs(), encoding="utf-8")


def status_of(cell: Result | None) -> str:
    return cell.status.value if cell is not None else ""
