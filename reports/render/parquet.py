"""Parquet export of a Report: one row per result, with run facts on every row.

Column schema (documented in the README; `PARQUET_SCHEMA` is the truth):

| column | type | meaning |
|---|---|---|
| run_id | int64 | store id of the run |
| backend, device | string | what ran |
| simulated | bool | true for the `sim` stand-in device |
| suite, subject, variant, dtype, mode | string | the work item |
| status | string | PASS, MISMATCH, ... |
| samples, samples_passed | int64 | samples run / passed |
| max_abs_err, max_rel_err, err_ratio | double (null) | worst sample errors |
| first_failure, message, failing_op | string (null) | what went wrong first |
| aten_ops | list<struct<op: string, count: int64>> | overloads hit on the device |
| fallback_ops | list<string> | overloads that ran via the CPU fallback |
| duration_s | double | wall time of the item |
| claimed | bool (null) | the suite claims the dtype for the device |
| check, divergence | string (null) | comparison applied; first divergent module |
| extra | string | suite-specific facts as a JSON object |
| compile | string | a compile-mode item's compile record as a JSON object (`{}` in eager mode) |
| op_time_s, compile_s | double (null) | measured seconds in the op itself / compiling, where a suite records them |
| graph_breaks, recompiles | int64 (null) | compile mode facts, where a suite records them |
| numerics | string | ulp statistics vs the float64 oracle as a JSON object ({} when not measured) |
| node | string (null) | the cluster node that ran the item (Ray executor); null: the run's own host |

The file's key-value metadata holds `neuron_check.run` (the run row as JSON)
and `neuron_check.schema` ("1").
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO

from op_db.records import Result
from reports.model import JSON_SCHEMA, Report
from reports.sanitize import for_json


# Measured performance facts lifted into columns from the compile record (Result.compile), or
# from `extra` (top level, or its "compile" object) where a plugin suite keeps them there.
PERF_SECONDS = ("op_time_s", "compile_s")
PERF_COUNTS = ("graph_breaks", "recompiles")


def performance(result: Result) -> dict[str, Any]:
    """The performance columns of one result; None where the suite recorded nothing."""
    nested = result.compile or (result.extra.get("compile") if isinstance(result.extra.get("compile"), dict) else {})
    row: dict[str, Any] = {}
    for names, kind in ((PERF_SECONDS, float), (PERF_COUNTS, int)):
        for name in names:
            value = result.extra.get(name, nested.get(name))
            row[name] = kind(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return row


def parquet_schema():
    import pyarrow as pa

    text, real = pa.string(), pa.float64()
    return pa.schema([
        ("run_id", pa.int64()), ("backend", text), ("device", text), ("simulated", pa.bool_()),
        ("suite", text), ("subject", text), ("variant", text), ("dtype", text), ("mode", text),
        ("status", text), ("samples", pa.int64()), ("samples_passed", pa.int64()),
        ("max_abs_err", real), ("max_rel_err", real), ("err_ratio", real),
        ("first_failure", text), ("message", text), ("failing_op", text),
        ("aten_ops", pa.list_(pa.struct([("op", text), ("count", pa.int64())]))),
        ("fallback_ops", pa.list_(text)),
        ("duration_s", real), ("claimed", pa.bool_()), ("check", text), ("divergence", text),
        ("extra", text), ("compile", text),
        *((name, real) for name in PERF_SECONDS), *((name, pa.int64()) for name in PERF_COUNTS),
        ("numerics", text), ("node", text),
    ])


def parquet_rows(report: Report) -> list[dict[str, Any]]:
    run = report.run
    rows = []
    for r in report.results:
        row = r.to_dict()
        row["aten_ops"] = [{"op": op, "count": int(n)} for op, n in sorted(r.aten_ops.items())]
        row["fallback_ops"] = list(r.fallback_ops)
        row["extra"] = json.dumps(r.extra, sort_keys=True, default=str)
        row["compile"] = json.dumps(r.compile, sort_keys=True, default=str)
        row.update(performance(r))
        row["numerics"] = json.dumps(r.numerics, sort_keys=True)
        row.update(run_id=run.get("id"), backend=run.get("backend"), device=run.get("device"),
                   simulated=report.simulated)
        rows.append(row)
    return rows


def write_parquet(report: Report, target: str | BinaryIO) -> int:
    """Write the results table; returns the number of rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = parquet_schema().with_metadata({
        "neuron_check.schema": str(JSON_SCHEMA),
        "neuron_check.run": json.dumps(run_metadata(report), sort_keys=True, default=str),
    })
    rows = for_json(parquet_rows(report))  # the raw text, but no lone surrogate (Arrow strings are UTF-8)
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, target)
    return len(rows)


def run_metadata(report: Report) -> dict[str, Any]:
    return {**report.run, "simulated": report.simulated}
