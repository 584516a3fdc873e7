"""Options shared by several commands, so each is spelled one way."""

from __future__ import annotations

import os

import click

db_option = click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Results database (default: $NEURON_CHECK_DB or ./neuron-check.db).",
)

device_option = click.option(
    "--device",
    default=None,
    help="Backend to test: neuron, cuda, xpu, mps, hpu, npu, meta, cpu, privateuseone, sim, "
    "or a plugin's name; NAME:N picks a device index. Default: neuron if available, "
    "else the current torch.accelerator, else sim.",
)

sim_profile_option = click.option(
    "--sim-profile",
    type=click.Path(dir_okay=False),
    default=None,
    help="Coverage/fault profile (JSON) for the sim device; also $NEURON_CHECK_SIM_PROFILE.",
)


def format_option(*choices: str, default: str = "table"):
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default=default,
        show_default=True,
        help="Output format.",
    )


def split_list(text: str | None) -> list[str]:
    """'a, b,,c' -> ['a', 'b', 'c']."""
    if not text:
        return []
    return [part.strip() for part in text.split(",") if part.strip()]


def apply_sim_profile(path: str | None) -> str | None:
    """Validate a sim profile and export it so worker processes inherit it."""
    path = path or os.environ.get("NEURON_CHECK_SIM_PROFILE") or None
    if path is None:
        return None
    import conformance.sim as sim

    sim.load_profile(path)  # raises InputError naming the bad entry
    path = os.path.abspath(path)
    os.environ["NEURON_CHECK_SIM_PROFILE"] = path
    return path


def resolve_device(device: str | None, sim_profile: str | None = None):
    """Adapter (initialised) and device string for --device; InputError when unusable."""
    from conformance import backends

    profile = apply_sim_profile(sim_profile)
    adapter, device_string = backends.resolve(device)
    if profile is not None and adapter.name != "sim":
        raise click.UsageError("--sim-profile applies only to --device sim.")
    adapter.init()
    return adapter, device_string
