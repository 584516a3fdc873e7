"""`neuron-check devices`: every known backend and whether it is usable here."""

from __future__ import annotations

import json

import click

from porting_cli.options import format_option


@click.command("devices")
@format_option("table", "json")
def command(fmt: str) -> None:
    """List every known backend: availability, device count, versions, dispatch key."""
    from conformance import backends
    from reports.render.devices import devices_table

    rows = [backends.get(name).describe() for name in backends.names()]
    if fmt == "json":
        click.echo(json.dumps({"schema": 1, "devices": rows}, indent=2))
    else:
        click.echo(devices_table(rows))
