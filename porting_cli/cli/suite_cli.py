"""Suite commands (`ops`, `models`, a plugin suite's), generated from one shared option set
plus the options the suite's options dataclass declares (conformance/suite.py, `cli_option`).

A command is `suite_command(...)`: the shared options (`RunOptions`: device, database,
engine, executor) and the suite's own become click options; the callback builds both
dataclasses and calls `run_suite`, which tests call directly too.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import click

from porting_cli.cli.options import (
    db_option, device_option, engine_options, executor_options, selection, series_option, sim_profile_option,
    split_list,
)


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """The options every suite command shares."""

    device: str | None = None
    sim_profile: str | None = None
    db_path: str | None = None
    compile_backend: str | None = None
    fullgraph: bool = False
    dynamic: bool = False
    compile_options: str | None = None
    jobs: int = 1
    timeout_s: float | None = None  # None: the suite's default for its modes (default_timeout_s)
    seed: int = 0
    resume: str | None = None
    junit_path: str | None = None
    fail_on: str | None = None
    strict_fallback: bool = False
    run_group: str | None = None
    executor: str | None = None
    ray_address: str | None = None
    ray_connect_timeout_s: float | None = None
    series: str | None = None


_RUN_FIELDS = {f.name for f in dataclasses.fields(RunOptions)}
_COMPILE_OPTIONS = (
    click.option("--compile-backend", default=None,
                 help="torch.compile backend to use instead of the device's own (compile mode)."),
    click.option("--fullgraph", is_flag=True, help="Compile mode: a graph break fails the item (fullgraph=True)."),
    click.option("--dynamic", is_flag=True, help="Compile mode: dynamic shapes (models: the batch dimension, "
                 "checked with a second batch size)."),
    click.option("--compile-options", default=None, metavar="JSON",
                 help="Compile mode: the backend's options as a JSON object, e.g. '{\"max_autotune\": true}'."),
)


def _click_option(field: dataclasses.Field, spec: Any) -> Callable:
    """The click option a `cli_option` field declares."""
    common = {"help": spec.help, "show_default": spec.show_default}
    if spec.kind == "argument":
        return click.argument(field.name, metavar=spec.flag)
    if spec.kind == "flag":
        return click.option(spec.flag, f"{field.name}_flag", is_flag=True, help=spec.help)
    if spec.kind == "list":
        default = ",".join(field.default) if field.default else None
        return click.option(spec.flag, field.name, default=default, **common)
    if spec.kind == "choice":
        return click.option(spec.flag, field.name, type=click.Choice(list(spec.choices)), default=field.default, **common)
    if spec.kind == "count":
        return click.option(spec.flag, field.name, type=click.IntRange(min=1), default=field.default, **common)
    return click.option(spec.flag, field.name, default=field.default, **common)


def _suite_values(options_type: type, values: dict[str, Any]) -> dict[str, Any]:
    """Click's values -> the options dataclass's keyword arguments."""
    from conformance.suite import cli_fields

    found: dict[str, Any] = {}
    for field, spec in cli_fields(options_type):
        if spec.kind == "flag":
            flag = values.pop(f"{field.name}_flag")
            found[field.name] = (not flag) if spec.negate else flag
        elif spec.kind == "list":
            text = values.pop(field.name)
            found[field.name] = tuple(split_list(text) if spec.empty_ok else selection(text, spec.flag))
        else:
            found[field.name] = values.pop(field.name)
    return found


def _flag_params(options_type: type) -> dict[str, str]:
    """Click parameter name -> options field, where they differ (flags), for --resume's check."""
    from conformance.suite import cli_fields

    return {f"{field.name}_flag": field.name for field, spec in cli_fields(options_type) if spec.kind == "flag"}


def suite_command(name: str, options_type: type, *, help: str, default_timeout: float,
                  extra_params: tuple[Callable, ...] = (), intercept: Callable[..., int | None] | None = None,
                  after_start: Callable[[Any, int, Any], None] | None = None) -> click.Command:
    """The click command `name` for the suites whose `command` is `name`.

    `extra_params` are click decorators for options that are not the suite's (a listing mode);
    `intercept(extras, suite_values, run)` may answer instead of a run (an exit code), and
    `after_start(store, run_id, adapter)` records more about a new run.
    """
    from conformance.suite import cli_fields

    def callback(**values: Any) -> int:
        run = RunOptions(**{k: values.pop(k) for k in list(values) if k in _RUN_FIELDS})
        suite_values = _suite_values(options_type, values)
        if intercept is not None:
            answered = intercept(values, suite_values, run)
            if answered is not None:
                return answered
        return run_suite(name, options_type, run, suite_values, after_start=after_start)

    # Only a suite with a compile mode (a `modes` field: --mode eager,compile) takes the compile
    # flags; `dist` has no compiled checks, and listed them while ignoring them.
    compiles = "modes" in {f.name for f in dataclasses.fields(options_type)}
    func = callback
    for decorator in reversed((device_option, sim_profile_option, db_option,
                               *(_click_option(f, spec) for f, spec in cli_fields(options_type)),
                               *(_COMPILE_OPTIONS if compiles else ()), *extra_params,
                               engine_options(default_timeout=default_timeout, compiles=compiles), executor_options, series_option)):
        func = decorator(func)
    return click.command(name, help=help)(func)


def plugin_commands() -> dict[str, click.Command]:
    """Commands of the suites third parties register (entry points `neuron_check.suites`);
    the built-in ones have their modules under porting_cli/cli/commands/."""
    from conformance import suite

    found: dict[str, click.Command] = {}
    for name in suite.names():
        if name in suite.BUILTIN:
            continue
        plugin = suite.get(name)
        if plugin.command and plugin.command not in found:
            doc = (type(plugin).__doc__ or f"Run the {plugin.name} suite on a device.").strip()
            found[plugin.command] = suite_command(plugin.command, plugin.options_type, help=doc,
                                                  default_timeout=plugin.default_timeout_s)
    return found


def run_suite(command: str, options_type: type, run: RunOptions, suite_values: dict[str, Any], *,
              after_start: Callable[[Any, int, Any], None] | None = None) -> int:
    """Plan (or rebuild the plan of `--resume`), run through the engine, report; the exit code."""
    from conformance import suite
    from conformance.backends.opening import resolve_device
    from conformance.engine.local import prestart_workers, start_run
    from op_db.errors import InputError
    from op_db.store import Store
    from porting_cli.cli.options import (
        check_outputs, executor_settings, fail_statuses, resume_run, run_and_report,
    )
    from porting_cli.cli.resume import requested_sim_profile

    suites = suite.for_command(command)
    executor = executor_settings(run.executor, run.ray_address, run.ray_connect_timeout_s)
    prestart_workers(run.jobs, tuple(s.name for s in suites), executor["executor"])  # they import while we plan
    failing = fail_statuses(run.fail_on, run.strict_fallback)
    check_outputs(run.junit_path)
    primary = suites[0].name  # the run's `suite` option: which command can --resume it
    options = options_type(**suite_values)
    compiling = _compile_settings(run, options)
    fresh = {"suite": primary, **suite.options_to_dict(options), "seed": run.seed, **compiling.to_dict(),
             "run_group": run.run_group, "series": run.series}
    timeout_s = run.timeout_s if run.timeout_s is not None else default_timeout_s(suites[0], options)
    runner = None
    if run.resume is None:
        # Everything the user typed is checked before the database is touched: a bad device,
        # profile or selection must not leave a new (empty) database behind.
        adapter, device_string = resolve_device(run.device, run.sim_profile)
        _check_compiler(adapter, compiling, options)
        config = _run_config(run, adapter, device_string, fresh, options, timeout_s, executor)
        runner = _suite_executor(suites[0], config, adapter)
        items = suite.plan(command, options)
        if not items and not getattr(options, "shard", None):
            raise InputError("nothing to run: the selection gives no items (for ops: no chosen op supports "
                             "the chosen dtypes on the CPU).")
        runner.connect(config)  # an unreachable cluster: one sentence, and no run recorded
    store = None
    try:
        store = Store.open(run.db_path)
        if run.resume is not None:
            requested = {**fresh, "timeout_s": timeout_s, "sim_profile": requested_sim_profile(run.sim_profile)}
            run_id, saved, adapter, device_string = resume_run(store, run.resume, primary, command, requested,
                                                               renamed=_flag_params(options_type))
            options = suite.options_from_dict(options_type, saved)
            timeout_s = saved.get("timeout_s", timeout_s)
            config = _run_config(run, adapter, device_string, saved, options, timeout_s, executor)
            runner = _suite_executor(suites[0], config, adapter)
            runner.connect(config)
            done = store.stored_items(run_id)
            items = [item for item in suite.plan(command, options) if item not in done]
        else:
            # An empty shard (more shards than items) is still a run, so `merge` sees every shard.
            run_id = start_run(store, config, adapter, {**fresh, "sim_profile": config.sim_profile,
                                                       "jobs": run.jobs, "timeout_s": timeout_s})
            if after_start is not None:
                after_start(store, run_id, adapter)
        return run_and_report(store, items, config, adapter, run_id, command_name=command, junit_path=run.junit_path,
                              failing_statuses=failing, strict_fallback=run.strict_fallback, executor=runner)
    finally:
        if runner is not None:
            runner.close()
        if store is not None:
            store.close()


def _suite_executor(primary, config, adapter):
    """The executor of the run: a suite whose items need more than one worker each (dist: a world
    of ranks) brings its own; the others get the engine's, by --executor."""
    from conformance.engine.local import get_executor

    make = getattr(primary, "make_executor", None)
    return make(config, adapter) if make is not None else get_executor(config)


# Compile mode compiles every sample's graph (and recompiles as shapes change) inside the
# item's time, and a real backend's compiler may take minutes per graph: the eager limit would
# time out correct items, and the limit is there to catch hangs.
COMPILE_TIMEOUT_FACTOR = 5


def default_timeout_s(suite, options: Any) -> float:
    """The --timeout a run of `suite` gets when none is given: the suite's, 5x in compile mode."""
    compiles = "compile" in (getattr(options, "modes", None) or ())
    return suite.default_timeout_s * (COMPILE_TIMEOUT_FACTOR if compiles else 1)


def _run_config(run: RunOptions, adapter, device_string: str, saved: dict[str, Any], options, timeout_s,
                executor: dict[str, Any]):
    from conformance.compiling.settings import CompileSettings
    from conformance.engine.config import RunConfig

    return RunConfig(backend=adapter.name, device=device_string, compile=CompileSettings.from_dict(saved),
                     jobs=run.jobs, timeout_s=timeout_s, seed=saved.get("seed", 0),
                     sim_profile=os.environ.get("NEURON_CHECK_SIM_PROFILE") if adapter.name == "sim" else None,
                     suite_options=options, **executor)


def _compile_settings(run: RunOptions, options: Any):
    """The run's CompileSettings; compile options without a compile mode are refused."""
    from conformance.compiling.settings import CompileSettings, parse_compile_options
    from op_db.errors import InputError

    settings = CompileSettings(backend=run.compile_backend, fullgraph=run.fullgraph, dynamic=run.dynamic,
                               options=parse_compile_options(run.compile_options))
    modes = getattr(options, "modes", None)
    if modes is not None and "compile" not in modes:
        given = [flag for flag, value in (("--compile-backend", run.compile_backend), ("--fullgraph", run.fullgraph),
                                           ("--dynamic", run.dynamic), ("--compile-options", run.compile_options))
                 if value]
        if given:
            raise InputError(f"{given[0]} applies to compile mode only: add --mode compile (or --mode eager,compile).")
    return settings


def _check_compiler(adapter, settings, options: Any) -> None:
    """Compile mode needs a torch.compile backend: the one named, or the adapter's own."""
    from conformance.compiling.settings import check_backend
    from op_db.errors import InputError

    if "compile" not in (getattr(options, "modes", None) or ()):
        return
    if settings.backend is not None:
        check_backend(settings.backend)
    elif not adapter.compile_backend:
        raise InputError(f"the {adapter.name} backend has no torch.compile backend; name one with --compile-backend.")
