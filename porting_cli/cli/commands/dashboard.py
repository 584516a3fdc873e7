"""`neuron-check dashboard`: the static nightly site."""

from __future__ import annotations

import click


@click.command("dashboard")
@click.option("--db", "db_paths", multiple=True, type=click.Path(dir_okay=False),
              help="Results database (repeatable; default: $NEURON_CHECK_DB or ./neuron-check.db).")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False),
              help="Folder to write the site into (index.html, ops/, runs/, plotly.min.js).")
def command(db_paths: tuple[str, ...], output: str) -> None:
    """Latest coverage per backend and device, trends, regressions, and one page per op.

    \b
    neuron-check dashboard --db nightly.db -o site/
    neuron-check dashboard --db neuron.db --db sim.db -o site/ && open site/index.html
    """
    from pathlib import Path

    from op_db.store import default_path
    from op_db.text import plural
    from reports.dashboard import build_dashboard
    from reports.sanitize import echo

    try:
        written = build_dashboard(list(db_paths) or [default_path()], output)
    except OSError as exc:  # the databases are read through the store, so this is the site's folder
        from op_db.errors import InputError

        raise InputError(f"cannot write the dashboard to {exc.filename or output}: {exc.strerror or exc}.") from None
    index = Path(output) / "index.html"
    echo(f"wrote {index}: {plural(written['series'], 'series', 'series')}, {plural(written['runs'], 'run')}, "
         f"{plural(written['ops'], 'op page')}")
