"""`neuron-check profile`: coverage profiles for the sim device."""

from __future__ import annotations

import click

from porting_cli.cli.options import db_option


@click.group("profile")
def command() -> None:
    """Coverage profiles: export what a real backend measured, to dry-run against it on `sim`."""


@command.command("export")
@db_option
@click.option("--run", "run_spec", default="latest", show_default=True, help="Run id, or 'latest'.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Profile JSON to write.")
def export(db_path: str | None, run_spec: str, output: str) -> None:
    """Write a sim profile (unsupported ops, fallback ops, unsupported dtypes) from a run.

    \b
    neuron-check profile export --run latest -o neuron-profile.json
    neuron-check train.py --device sim --sim-profile neuron-profile.json
    """
    from op_db.profile import export_profile
    from op_db.store import open_for_reading
    from reports.sanitize import echo

    with open_for_reading(db_path) as store:
        profile = export_profile(store, run_spec, output)
    echo(
        f"wrote {output}: {len(profile['unsupported_ops'])} unsupported ops, "
        f"{len(profile['fallback_ops'])} fallback ops, {len(profile['unsupported_dtypes'])} unsupported dtypes"
    )
