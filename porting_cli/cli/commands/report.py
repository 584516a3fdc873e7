"""`neuron-check report`: the coverage report of one run, in any format."""

from __future__ import annotations

import click

from porting_cli.cli.options import db_option, format_option, split_list

run_option = click.option(
    "--run", "run_spec", default="latest", show_default=True, help="Run id, or 'latest'."
)


@click.command("report")
@db_option
@run_option
@format_option("table", "md", "html", "json", "junit", "parquet", "hf")
@click.option("-o", "--output", type=click.Path(), default=None,
              help="Write to FILE instead of stdout (required for parquet; a folder for hf).")
@click.option("--claims", "claims_path", type=click.Path(dir_okay=False), default=None,
              help="A vendor's compatibility table (CSV or Markdown): judge each claimed row against the run.")
@click.option("--zoo", "zoo_paths", type=click.Path(dir_okay=False), multiple=True,
              help="A zoo census (models --list --check-build --format json): rank the blocking aten overloads "
                   "by the zoo models whose forward uses them. Repeat it for both libraries' censuses "
                   "(--library transformers and diffusers) to rank over both.")
@click.option("--runs", "run_list", default=None, help="With --format hf: comma list of run ids, one dataset.")
@click.option("--all", "all_runs", is_flag=True, help="With --format hf: every run of the database, one dataset.")
@click.option("--push-to-hub", "hub_repo", default=None, metavar="REPO",
              help="With --format hf: also publish the dataset to this Hugging Face Hub repo (needs a login).")
def command(db_path: str | None, run_spec: str, fmt: str, output: str | None, claims_path: str | None,
            zoo_paths: tuple[str, ...], run_list: str | None, all_runs: bool, hub_repo: str | None) -> None:
    """Coverage report of a run: matrix, pass rates, blocking ops, claims, fallbacks.

    \b
    neuron-check report                          table of the latest run
    neuron-check report --format html -o r.html  one self-contained page
    neuron-check report --run 3 --format json    the JSON export (gate baseline)
    neuron-check report --claims vendor.md       vendor claims vs what was measured
    neuron-check report --zoo census.json        blocking ops ranked by the zoo models using them
    neuron-check report --zoo tf.json --zoo diffusers.json   ... over both libraries' zoos
    neuron-check report --format hf --all -o ds/ every run as one datasets.Dataset
    """
    from op_db.store import open_for_reading
    from op_db.text import plural
    from reports.export import render, write_output
    from reports.model import report_from_store
    from reports.sanitize import echo

    if fmt != "hf" and (run_list or all_runs or hub_repo):
        raise click.UsageError("--runs, --all and --push-to-hub apply only to --format hf.")
    if fmt == "hf":
        from reports.render.hf import reports_for, write_dataset

        if not output:
            raise click.UsageError("--format hf writes a dataset folder: give -o DIR.")
        with open_for_reading(db_path) as store:
            reports = reports_for(store, split_list(run_list) or [run_spec], all_runs)
        rows = write_dataset(reports, output, push_to_hub=hub_repo)
        echo(f"wrote {output}: {plural(rows, 'result')} of {plural(len(reports), 'run')}"
                   + (f", pushed to {hub_repo}" if hub_repo else ""), err=True)
        return
    zoo_ops = None
    if zoo_paths:
        from reports.model import zoo_ops_from_census

        zoo_ops = {}
        for path in zoo_paths:
            zoo_ops.update(zoo_ops_from_census(path))
    with open_for_reading(db_path) as store:
        report = report_from_store(store, run_spec, zoo_ops)
    if claims_path:
        from reports.claims import apply_claims_table

        apply_claims_table(report, claims_path)
        if fmt in ("junit", "parquet"):
            echo(f"note: --format {fmt} holds one row per result; the claims verdicts are in "
                       "table, md, html and json.", err=True)
    write_output(render(report, fmt), output, fmt, what=f"{fmt} report of run {report.run.get('id')}")
