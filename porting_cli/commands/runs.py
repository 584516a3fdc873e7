"""`neuron-check runs`: every run in the database with its counts per status."""

from __future__ import annotations

import json

import click

from porting_cli.options import db_option, format_option


@click.command("runs")
@db_option
@format_option("table", "json")
def command(db_path: str | None, fmt: str) -> None:
    """List runs: id, date, backend, device, simulated, versions, counts per status."""
    from op_db.store import open_for_reading
    from reports.render.runs import runs_table

    with open_for_reading(db_path) as store:
        runs = store.run_summaries()
    if fmt == "json":
        click.echo(json.dumps({"schema": 1, "runs": runs}, indent=2, default=str))
    else:
        click.echo(runs_table(runs))
