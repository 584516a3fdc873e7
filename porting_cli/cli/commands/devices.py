"""`neuron-check devices`: every known backend and whether it is usable here."""

from __future__ import annotations

import click

from porting_cli.cli.options import format_option


@click.command("devices")
@format_option("table", "json")
def command(fmt: str) -> None:
    """List every known backend: availability, device count, versions, dispatch key."""
    from conformance import backends
    from reports.render.devices import devices_table
    from reports.sanitize import dumps_json, echo

    rows = [backends.get(name).describe() for name in backends.names()]
    if fmt == "json":
        echo(dumps_json({"schema": 1, "devices": rows}, indent=2))
    else:
        echo(devices_table(rows))
