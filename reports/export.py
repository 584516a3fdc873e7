"""One entry point from a Report to any output format (used by `report` and the gate)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from op_db.errors import InputError
from reports.model import Report
from reports.sanitize import dumps_json, echo

FORMATS = ("table", "md", "html", "json", "junit", "parquet")


def render_json(report: Report) -> str:
    return dumps_json(report.to_json(), indent=2, default=str) + "\n"


def junit_suite_name(report: Report) -> str:
    run = report.run
    name = f"neuron-check run {run.get('id')} {run.get('device')}"
    return name + " (simulated)" if report.simulated else name


def render(report: Report, fmt: str) -> str | bytes:
    if fmt == "table":
        from reports.render.text import render_table

        return render_table(report)
    if fmt == "md":
        from reports.render.text import render_markdown

        return render_markdown(report)
    if fmt == "html":
        from reports.render.html import render_html

        return render_html(report)
    if fmt == "json":
        return render_json(report)
    if fmt == "junit":
        from reports.render.junit import write_junit

        buffer = io.BytesIO()
        write_junit(report.results, buffer, suite_name=junit_suite_name(report))
        return buffer.getvalue()
    if fmt == "parquet":
        from reports.render.parquet import write_parquet

        buffer = io.BytesIO()
        write_parquet(report, buffer)
        return buffer.getvalue()
    raise InputError(f"unknown report format {fmt!r}; choose one of {', '.join(FORMATS)}.")


def write_output(data: str | bytes, output: str | None, fmt: str, what: str = "") -> None:
    """Write to a file, saying so on stderr ("wrote FILE: what"), or to stdout for text formats."""
    if output is None or output == "-":
        if isinstance(data, bytes) and fmt == "parquet":
            raise InputError("--format parquet is binary: give a file with -o FILE.parquet.")
        if isinstance(data, bytes):
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data)
        return
    path = Path(output)
    if not path.parent.exists():
        raise InputError(f"cannot write {path}: folder {path.parent} does not exist.")
    try:
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror}.") from None
    echo(f"wrote {path}" + (f": {what}" if what else ""), err=True)
