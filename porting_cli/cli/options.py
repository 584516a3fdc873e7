"""Options shared by several commands, so each is spelled one way."""

from __future__ import annotations

import click

from conformance.backends.opening import resolve_device

# Exit status of a run the executor stopped with items left (every Ray node gone): sysexits'
# EX_TEMPFAIL, "try again later", here with --resume.
EXIT_STOPPED = 75

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


series_option = click.option(
    "--series", "series", envvar="NEURON_CHECK_SERIES", default=None, metavar="NAME",
    help="Name the dashboard series this run belongs to (default: derived from backend, device, suite "
    "and selection; also $NEURON_CHECK_SERIES).",
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


def resume_run(store, resume: str, suite: str, command_name: str, requested: dict | None = None,
               renamed: dict | None = None):
    """The run `--resume` names, checked to be one of `command_name`'s, started with the options given
    (`requested`: what a new run would record; see porting_cli.cli.resume), and claimed for this process
    (refused while its owner lives), with its device ready: (run_id, saved options, adapter, device string)."""
    from op_db.errors import InputError
    from porting_cli.cli.resume import refuse_changed_options

    run_id = store.resolve_run(resume)
    stored = store.run(run_id)
    saved = stored["options"]
    if saved.get("suite") != suite:
        raise InputError(f"run {run_id} is not a `neuron-check {command_name}` run, "
                         f"so `{command_name} --resume` cannot finish it.")
    if requested is not None:
        refuse_changed_options(click.get_current_context(), run_id, requested, stored, renamed)
    adapter, device_string = resolve_device(stored["device"], saved.get("sim_profile"))
    store.claim_run(run_id)
    return run_id, saved, adapter, device_string


def selection(text: str | None, flag: str) -> list[str]:
    """A comma list naming what to run; given but empty (`--ops ''`) is an error, not "everything"."""
    chosen = split_list(text)
    if text is not None and not chosen:
        from op_db.errors import InputError

        raise InputError(f"{flag} {text!r} selects nothing; name at least one, or leave {flag} out for all.")
    return chosen


def engine_options(default_timeout: float = 120.0, compiles: bool = False):
    """--jobs, --timeout, --seed, --resume, --junit, --fail-on, --strict-fallback, --run-group:
    every suite command that runs items through the engine spells them this way."""
    def decorate(func):
        for option in reversed((
            click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes (--executor ray: actors in the whole cluster, one device each)."),
            click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=None,
                         show_default=f"{default_timeout:g} s" + ("; 5x with --mode compile" if compiles else ""),
                         help="Seconds one item may run before its worker is killed (TIMEOUT)."),
            click.option("--seed", type=int, default=0, show_default=True, help="Seed for inputs, weights and random ops."),
            click.option("--resume", "resume", default=None, help="Finish run RUN_ID: run only the items it has not stored yet."),
            click.option("--junit", "junit_path", type=click.Path(dir_okay=False), default=None, help="Write JUnit XML here."),
            click.option("--fail-on", "fail_on", default=None,
                         help="Exit 1 if any item has one of these statuses (e.g. MISMATCH,ERROR,CRASH)."),
            click.option("--strict-fallback", is_flag=True, help="Count FALLBACK as a failure (for --fail-on and JUnit)."),
            click.option("--run-group", envvar="NEURON_CHECK_RUN_GROUP", default=None,
                         help="Label shared by the shards of one CI run, so `merge` joins them "
                         "(also $NEURON_CHECK_RUN_GROUP)."),
        )):
            func = option(func)
        return func
    return decorate


def check_outputs(junit_path: str | None) -> None:
    """Refuse an unwritable --junit before a run starts: known in a second, not after an hour."""
    if junit_path:
        from reports.render.junit import check_target

        check_target(junit_path)


def fail_statuses(fail_on: str | None, strict_fallback: bool) -> set:
    """The statuses of --fail-on (InputError for an unknown one), plus FALLBACK when strict."""
    from op_db.records import Status

    found = {Status.parse(s) for s in split_list(fail_on)}
    if strict_fallback:
        found.add(Status.FALLBACK)
    return found


def run_and_report(store, items, config, adapter, run_id: int, *, command_name: str, junit_path: str | None,
                   failing_statuses: set, strict_fallback: bool, executor=None) -> int:
    """Run planned items through the engine, print the summary, write JUnit; the exit code
    (128 + the signal when interrupted: 130 Ctrl-C, 143 SIGTERM; EXIT_STOPPED when the executor
    could not go on, e.g. every node of the Ray cluster is gone; 1 when a --fail-on status
    occurred; else 0)."""
    from conformance.engine.local import run_items
    from op_db.records import FAILING, Status
    from op_db.text import plural
    from reports.render.summary import summary_table
    from reports.sanitize import echo

    label = " (simulated)" if adapter.simulated else ""
    echo(f"run {run_id}: {plural(len(items), 'item')} on {config.device}{label}, {plural(config.jobs, 'job')}", err=True)
    with store.keep_alive(run_id):
        summary = run_items(items, config, store, run_id, progress=True, executor=executor)
    results = store.results(run_id)
    echo(summary_table(results, run_id=run_id, device=config.device, simulated=adapter.simulated,
                             interrupted=summary.interrupted))
    if junit_path:
        from reports.render.junit import write_junit

        failing = FAILING | ({Status.FALLBACK} if strict_fallback else set())
        write_junit(results, junit_path, suite_name=f"neuron-check {command_name} run {run_id}", failing=frozenset(failing))
    if summary.interrupted:
        why = f" ({summary.stopped})" if summary.stopped else ""
        echo(f"neuron-check: run {run_id} interrupted{why}; finish it with: "
             f"{resume_command(store, command_name, run_id)}", err=True)
        return 128 + summary.signal if summary.signal else EXIT_STOPPED
    if failing_statuses and any(r.status in failing_statuses for r in results):
        return 1
    return 0


def resume_command(store, command_name: str, run_id: int) -> str:
    """The command line that finishes run `run_id` of `store` (--db only when not the default)."""
    import shlex

    from op_db.store import default_path

    words = ["neuron-check", command_name, "--resume", str(run_id)]
    if store.path.resolve() != default_path().resolve():
        words += ["--db", str(store.path)]
    return shlex.join(words)


def executor_options(func):
    """--executor, --ray-address and --ray-connect-timeout: where a suite command's items run
    (conformance.engine.local.EXECUTORS)."""
    func = click.option(
        "--ray-connect-timeout", "ray_connect_timeout_s", type=click.FloatRange(min=0.1), default=None,
        metavar="SECONDS",
        help="How long joining the cluster at --ray-address may take before the command gives up (exit 2) "
        "[default: 30].",
    )(func)
    func = click.option(
        "--ray-address", default=None, metavar="ADDR",
        help="Ray cluster to join: 'auto' (the cluster this host joined with `ray start`), HOST:PORT (the address "
        "`ray start --head` printed) or ray://HOST:PORT; implies --executor ray. Default: a private local Ray "
        "instance with --jobs CPUs.",
    )(func)
    return click.option(
        "--executor", type=click.Choice(["local", "ray"]), default=None,
        help="local (default): worker processes on this machine; ray: --jobs Ray actors across the cluster, "
        "each owning one device of its node (needs the ray extra).",
    )(func)


def executor_settings(executor: str | None, ray_address: str | None,
                      ray_connect_timeout_s: float | None = None) -> dict:
    """RunConfig fields for --executor/--ray-address/--ray-connect-timeout."""
    from conformance.engine.ray_connect import DEFAULT_CONNECT_TIMEOUT_S

    if ray_address and executor == "local":
        raise click.UsageError("--ray-address applies only to --executor ray.")
    if ray_connect_timeout_s is not None and not ray_address:
        raise click.UsageError("--ray-connect-timeout applies only with --ray-address.")
    return {"executor": executor or ("ray" if ray_address else "local"), "ray_address": ray_address or None,
            "ray_connect_timeout_s": ray_connect_timeout_s or DEFAULT_CONNECT_TIMEOUT_S}
