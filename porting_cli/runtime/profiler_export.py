"""The outputs of `neuron-check trace`: table, JSON, HTML (per-line table beside the source) and
a Parquet folder for agents.

Parquet schema, version 2 (PARQUET_SCHEMA_VERSION; documented in docs/trace.md): a folder with

* ``op_events.parquet``: one row per profiler op event: step, file, line, function, op, phase
  (forward|backward), top_level, shapes (JSON), dtypes (JSON), device_time_s, cpu_time_s,
  cpu_total_s, fallback, copy_bytes, kind, thread, sequence_nr;
* ``lines.parquet``: one row per user line: file, line, device_time_s, cpu_time_s, cpu_total_s,
  backward_device_time_s, backward_total_s, ops, fallback_ops (JSON op -> count),
  fallback_time_s, copies, copy_bytes, copy_time_s, syncs, sync_kinds (JSON), graph_breaks,
  recompiles, compile_reasons (JSON list), chain (JSON);
* ``meta.json``: {"schema": 2, "script", "device", "profiler_total_s", "notes"}.
"""

from __future__ import annotations

import html
import json
import os
from typing import Any

PARQUET_SCHEMA_VERSION = 2  # 2: graph_breaks, recompiles, compile_reasons
EVENT_COLUMNS = {"step": "int64", "file": "string", "line": "int64", "function": "string", "op": "string",
                 "phase": "string", "top_level": "bool", "shapes": "string", "dtypes": "string",
                 "device_time_s": "float64", "cpu_time_s": "float64", "cpu_total_s": "float64",
                 "fallback": "bool", "copy_bytes": "int64", "kind": "string", "thread": "int64",
                 "sequence_nr": "int64"}
LINE_COLUMNS = {"file": "string", "line": "int64", "device_time_s": "float64", "cpu_time_s": "float64",
                "cpu_total_s": "float64", "backward_device_time_s": "float64", "backward_total_s": "float64",
                "ops": "int64", "fallback_ops": "string", "fallback_time_s": "float64", "copies": "int64",
                "copy_bytes": "int64", "copy_time_s": "float64", "syncs": "int64", "sync_kinds": "string",
                "graph_breaks": "int64", "recompiles": "int64", "compile_reasons": "string", "chain": "string"}
_JSON_FIELDS = ("fallback_ops", "sync_kinds", "compile_reasons", "chain")


def render_table(report: dict[str, Any], top: int = 20) -> str:
    out = [f"{report['script']} on {report['device']}: {report['profiler_total_s'] * 1e3:.3f} ms of device "
           f"time in {report['steps_profiled']} step(s), {report['attributed_s'] * 1e3:.3f} ms attributed to lines"]
    out += [f"note: {n}" for n in report["notes"]]
    out.append(f"{'line':<40} {'device ms':>10} {'cpu ms':>9} {'ops':>5} {'copies':>6} {'syncs':>5} {'compile':>7}  fallback")
    for r in report["lines"][:top]:
        where = f"{r['file']}:{r['line']}" if r["line"] else r["file"]
        out.append(f"{where[-40:]:<40} {r['device_time_s'] * 1e3:>10.3f} {r['cpu_time_s'] * 1e3:>9.3f} "
                   f"{r['ops']:>5} {r['copies']:>6} {r['syncs']:>5} {compile_cell(r):>7}  "
                   f"{', '.join(sorted(r['fallback_ops']))}")
    if report["bottlenecks"]:
        out.append("bottlenecks:")
        out += [f"  {b['site']} ({b['share']:.0%}): {b['advice']}" for b in report["bottlenecks"]]
    return "\n".join(out) + "\n"


def compile_cell(r: dict[str, Any]) -> str:
    """'2b 1r': the line's graph breaks and recompiles under torch.compile ('' for none)."""
    return " ".join(f"{n}{mark}" for n, mark in ((r["graph_breaks"], "b"), (r["recompiles"], "r")) if n)


def render_json(report: dict[str, Any]) -> str:
    from reports.sanitize import dumps_json

    return dumps_json(report, indent=2) + "\n"


def render_html(report: dict[str, Any]) -> str:
    """Per file: the source with each line's device time, ops, copies, syncs and fallbacks beside it."""
    esc = html.escape
    by_file: dict[str, dict[int, dict[str, Any]]] = {}
    for r in report["lines"]:
        if r["line"]:
            by_file.setdefault(r["file"], {})[r["line"]] = r
    parts = ["<!doctype html><meta charset='utf-8'><title>neuron-check trace</title>",
             "<style>td{font-family:monospace;white-space:pre;padding:0 6px}tr.hot{background:#fee}</style>",
             f"<h1>{esc(str(report['script']))} on {esc(str(report['device']))}</h1>",
             f"<p>{report['profiler_total_s'] * 1e3:.3f} ms of device time</p>"]
    parts += [f"<p>note: {esc(n)}</p>" for n in report["notes"]]
    parts.append("<h2>Bottlenecks</h2><ol>")
    parts += [f"<li>{esc(b['site'])}: {esc(b['advice'])}</li>" for b in report["bottlenecks"]]
    parts.append("</ol>")
    total = report["profiler_total_s"] or 1.0
    for file, rows in by_file.items():
        parts.append(f"<h2>{esc(file)}</h2><table><tr><th>device ms</th><th>ops</th><th>copies</th>"
                     "<th>syncs</th><th>compile</th><th>fallback</th><th>#</th><th>source</th></tr>")
        for number, text in enumerate(_source(file, report), start=1):
            r = rows.get(number)
            cells = (f"{r['device_time_s'] * 1e3:.3f}", str(r["ops"]), str(r["copies"]), str(r["syncs"]),
                     compile_cell(r), ", ".join(sorted(r["fallback_ops"]))) if r else ("",) * 6
            hot = " class='hot'" if r and r["device_time_s"] / total > 0.1 else ""
            parts.append(f"<tr{hot}>" + "".join(f"<td>{esc(c)}</td>" for c in cells)
                         + f"<td>{number}</td><td>{esc(text)}</td></tr>")
        parts.append("</table>")
    return "\n".join(parts) + "\n"


def _source(file: str, report: dict[str, Any]) -> list[str]:
    for path in (file, os.path.join(os.path.dirname(os.path.abspath(report["script"])), file)):
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                return handle.read().splitlines()
        except OSError:
            continue
    return []


def write_parquet(report: dict[str, Any], events: list[dict[str, Any]], folder: str) -> list[str]:
    """The Parquet folder (schema in the module doc); returns the files written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(folder, exist_ok=True)
    line_rows = [{k: (json.dumps(r[k]) if k in _JSON_FIELDS else r[k]) for k in LINE_COLUMNS} for r in report["lines"]]
    written = []
    for name, columns, rows in (("op_events", EVENT_COLUMNS, events), ("lines", LINE_COLUMNS, line_rows)):
        schema = pa.schema([(k, pa.from_numpy_dtype(_numpy(t)) if t != "string" else pa.string())
                            for k, t in columns.items()],
                           metadata={"neuron_check_schema": str(PARQUET_SCHEMA_VERSION)})
        table = pa.Table.from_pylist([{k: r.get(k) for k in columns} for r in rows], schema=schema)
        path = os.path.join(folder, f"{name}.parquet")
        pq.write_table(table, path)
        written.append(path)
    meta = {"schema": PARQUET_SCHEMA_VERSION, "script": report["script"], "device": report["device"],
            "profiler_total_s": report["profiler_total_s"], "notes": report["notes"]}
    with open(os.path.join(folder, "meta.json"), "w", encoding="utf-8") as handle:
        json.dump(meta, handle, indent=2)
    return written + [os.path.join(folder, "meta.json")]


def _numpy(name: str) -> Any:
    import numpy

    return {"int64": numpy.int64, "float64": numpy.float64, "bool": numpy.bool_}[name]
