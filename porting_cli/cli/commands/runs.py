"""`neuron-check runs`: every run in the database with its counts per status."""

from __future__ import annotations

import click

from porting_cli.cli.options import db_option, format_option


@click.command("runs")
@db_option
@format_option("table", "json")
def command(db_path: str | None, fmt: str) -> None:
    """List runs: id, date, backend, device, simulated, versions, counts per status."""
    from op_db.store import open_for_reading
    from reports.render.runs import runs_table
    from reports.sanitize import dumps_json, echo

    with open_for_reading(db_path) as store:
        runs = store.run_summaries()
    if fmt == "json":
        echo(dumps_json({"schema": 1, "runs": runs}, indent=2, default=str))
    else:
        echo(runs_table(runs))
