"""`neuron-check coverage`: static dispatcher registrations for a device's dispatch key."""

from __future__ import annotations

import click

from porting_cli.cli.options import device_option, format_option, sim_profile_option


@click.command("coverage")
@device_option
@sim_profile_option
@click.option("--kind", "kinds", multiple=True,
              help="List only ops of this kind (repeatable): direct, CompositeExplicitAutograd, "
                   "CompositeExplicitAutogradNonFunctional, CompositeImplicitAutograd, fallback, missing.")
@click.option("--summary", is_flag=True, help="Counts per kind only, no op list.")
@format_option("table", "json")
def command(device, sim_profile, kinds, summary, fmt) -> None:
    """Which aten ops the backend registers: direct kernel, composite, fallback, or missing.

    These are registrations, not results: `neuron-check ops` measures what works.

    \b
    neuron-check coverage --device sim --summary
    neuron-check coverage --device neuron --kind missing
    neuron-check coverage --device meta --format json > meta-coverage.json
    """
    from op_db.errors import InputError
    from op_db.inventory import KINDS, coverage_summary, dispatcher_coverage
    from conformance.backends.opening import resolve_device
    from reports.render.coverage import coverage_table
    from reports.sanitize import dumps_json, echo

    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise InputError(f"unknown --kind {unknown[0]!r}; choose from {', '.join(KINDS)}.")
    adapter, device_string = resolve_device(device, sim_profile)
    profile = adapter.coverage_profile()
    rows = dispatcher_coverage(adapter.dispatch_key, profile=profile)
    counts = coverage_summary(rows)
    listed = [] if summary else [(op, kind) for op, kind in rows if not kinds or kind in kinds]
    if fmt == "json":
        echo(dumps_json({
            "schema": 1, "device": device_string, "backend": adapter.name,
            "dispatch_key": adapter.dispatch_key, "simulated": bool(adapter.simulated),
            "sim_profile": profile.name if profile is not None else None,
            "summary": counts, "ops": [{"op": op, "kind": kind} for op, kind in listed],
        }, indent=2))
    else:
        echo(coverage_table(device_string, adapter.dispatch_key, bool(adapter.simulated), counts, listed,
                            profile.name if profile is not None else None))
