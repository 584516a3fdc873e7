"""`--resume`: options given with it must be the run's own.

A resumed run rebuilds its plan from the options it recorded, so an option
given again on the command line would be silently ignored. Instead, one that
differs from the run's is refused, naming each difference. Only options that
change no result may differ: where results go and how they are judged.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import click
from click.core import ParameterSource

from op_db.errors import InputError

# Parameters free on --resume: none of them changes a result.
FREE_ON_RESUME = frozenset({
    "db_path", "resume", "jobs", "junit_path", "fail_on", "strict_fallback", "executor", "ray_address",
    "ray_connect_timeout_s",
})


def requested_sim_profile(path: str | None) -> str | None:
    """--sim-profile as the run records it (absolute), for comparing with a stored run."""
    return os.path.abspath(path) if path else None


def changed_options(ctx: click.Context, requested: Mapping[str, Any], run: Mapping[str, Any],
                    renamed: Mapping[str, str] | None = None) -> list[str]:
    """'--flag given (the run has stored)' for every option given on the command line that differs
    from the run's. `requested` holds what a new run with these options would record, keyed like the
    run's options; `renamed` maps a parameter name to its key there where they differ."""
    renamed = renamed or {}
    saved = run.get("options") or {}
    flags = {param.name: next((o for o in param.opts if o.startswith("--")), param.opts[0])
             for param in ctx.command.params}
    differences = []
    for name in ctx.params:
        if name in FREE_ON_RESUME or ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE:
            continue
        if name == "device":
            if ctx.params[name] not in (run.get("device"), run.get("backend")):
                differences.append(f"--device {ctx.params[name]} (the run has {run.get('device')})")
            continue
        key = renamed.get(name, name)
        if key not in requested:
            differences.append(f"{flags.get(name, name)} (it does not apply to a resumed run)")
        elif _normal(requested[key]) == _normal(saved.get(key)):
            continue
        elif isinstance(ctx.params[name], bool):
            differences.append(f"{flags.get(name, name)} (the run was started without it)")
        else:
            differences.append(f"{flags.get(name, name)} {_shown(requested[key])} (the run has {_shown(saved.get(key))})")
    return differences


def refuse_changed_options(ctx: click.Context, run_id: int, requested: Mapping[str, Any],
                           run: Mapping[str, Any], renamed: Mapping[str, str] | None = None) -> None:
    differences = changed_options(ctx, requested, run, renamed)
    if differences:
        raise InputError(
            f"--resume {run_id} cannot change the run's options: {'; '.join(differences)}; "
            "leave them out to resume the run as it was started, or start a new run."
        )


def _normal(value: Any) -> Any:
    if isinstance(value, tuple):
        value = list(value)
    return None if value in (None, "", []) else value


def _shown(value: Any) -> str:
    value = _normal(value)
    if value is None:
        return "none"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)
