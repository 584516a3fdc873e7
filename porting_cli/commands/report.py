"""`neuron-check report`: the coverage report of one run, in any format."""

from __future__ import annotations

import click

from porting_cli.options import db_option, format_option

run_option = click.option(
    "--run", "run_spec", default="latest", show_default=True, help="Run id, or 'latest'."
)


@click.command("report")
@db_option
@run_option
@format_option("table", "md", "html", "json", "junit", "parquet")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write to FILE instead of stdout (required for parquet).")
def command(db_path: str | None, run_spec: str, fmt: str, output: str | None) -> None:
    """Coverage report of a run: matrix, pass rates, blocking ops, claims, fallbacks.

    \b
    neuron-check report                          table of the latest run
    neuron-check report --format html -o r.html  one self-contained page
    neuron-check report --run 3 --format json    the JSON export (gate baseline)
    """
    from op_db.store import open_for_reading
    from reports.export import render, write_output
    from reports.model import report_from_store

    with open_for_reading(db_path) as store:
        report = report_from_store(store, run_spec)
    write_output(render(report, fmt), output, fmt)
