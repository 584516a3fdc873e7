"""`neuron-check claims`: vendor compatibility tables, written from measurements."""

from __future__ import annotations

import click

from porting_cli.cli.options import db_option


@click.group("claims")
def command() -> None:
    """Compatibility tables (PyTorch API x Y / CPU_FALLBACK / N) from what a run measured.

    \b
    neuron-check claims export --run 7 -o table.md     the table a vendor should publish
    neuron-check report --run 7 --claims vendor.md     check a published table against run 7
    """


@command.command("export")
@db_option
@click.option("--run", "run_spec", default="latest", show_default=True, help="Run id, or 'latest'.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write to FILE (.md: Markdown, .csv: CSV) instead of stdout.")
@click.option("--format", "fmt", type=click.Choice(["md", "csv"]), default=None,
              help="Table format (default: from the -o suffix, else md).")
def export(db_path: str | None, run_spec: str, output: str | None, fmt: str | None) -> None:
    """One row per PyTorch API and measured claim, with dtypes and limitations, from the
    run's OpInfo results; `report --claims` of the file against the same run agrees on every row."""
    from op_db.store import open_for_reading
    from op_db.text import plural
    from reports.claims_export import export_rows, render_export
    from reports.export import write_output
    from reports.model import report_from_store

    fmt = fmt or ("csv" if output and output.lower().endswith(".csv") else "md")
    with open_for_reading(db_path) as store:
        report = report_from_store(store, run_spec)
    rows = export_rows(report.results)
    write_output(render_export(rows, fmt, report.run), output, fmt,
                 what=f"{plural(len(rows), 'row')} from run {report.run.get('id')}")
