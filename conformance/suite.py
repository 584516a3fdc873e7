"""The Suite protocol and the suite registry.

A suite is what the engine runs: it plans WorkItems from a selection (its options
dataclass), and inside a worker it prepares once and runs one item at a time. Its
options dataclass declares, in each field's metadata, the command-line option that
sets it (`cli_option`); porting_cli turns those declarations into click options, so
a new suite adds a command without touching the engine or the CLI's shared options.

Built-in suites: `opinfo` and `fp8` (both planned by `neuron-check ops`), `model`
(`neuron-check models`), `dist`, `kernels` (`neuron-check kernels TARGET`) and `quant` (`neuron-check quant`). A third party adds one through the entry-point group
`neuron_check.suites` (the entry point loads a Suite instance or class), as backends do in
`neuron_check.backends`.

Nothing here imports torch: `neuron-check --help` builds every command from it.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from op_db.errors import InputError
from op_db.records import Result, WorkItem

ENTRY_POINT_GROUP = "neuron_check.suites"
# Suite name (WorkItem.suite) -> "module:attribute" of its Suite; loaded when used.
BUILTIN = {
    "opinfo": "conformance.opinfo.suite:SUITE",
    "fp8": "conformance.fp8.suite:SUITE",
    "model": "conformance.models.suite:SUITE",
    "dist": "conformance.dist.suite:SUITE",
    "kernels": "conformance.kernels.suite:SUITE",
    "quant": "conformance.quant.suite:SUITE",
    "flex_attention": "conformance.flex.suite:SUITE",
}


@dataclasses.dataclass(frozen=True)
class CliOption:
    """How one options field is set on the command line (porting_cli/cli/suite_cli.py reads it).

    kind: "text" (a string), "list" (comma list -> tuple of str; given but empty is an error
    unless `empty_ok`), "flag" (a boolean; `negate` makes `--no-x` set the field False),
    "choice" (one of `choices`), "count" (an int >= 1), "argument" (a required positional
    argument; `flag` is its metavar).
    """

    flag: str
    help: str
    kind: str = "text"
    choices: tuple[str, ...] = ()
    negate: bool = False
    show_default: bool = False
    empty_ok: bool = False


def cli_option(default: Any, flag: str, help: str, **spec: Any) -> Any:
    """A dataclass field whose value the option `flag` sets."""
    return dataclasses.field(default=default, metadata={"cli": CliOption(flag, help, **spec)})


def cli_fields(options_type: type) -> list[tuple[dataclasses.Field, CliOption]]:
    return [(f, f.metadata["cli"]) for f in dataclasses.fields(options_type) if "cli" in f.metadata]


def options_to_dict(options: Any) -> dict[str, Any]:
    """JSON-able form of an options dataclass (tuples as lists), as the store keeps it."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(options).items()}


def options_from_dict(options_type: type, data: dict[str, Any]) -> Any:
    """The options dataclass back from `options_to_dict` output (unknown keys ignored, missing
    ones default), so a stored run rebuilds its plan on --resume. Runs stored before `ops`
    took a list of modes kept one `mode`: it reads as that one-mode list."""
    if "modes" not in data and isinstance(data.get("mode"), str):
        data = {**data, "modes": [data["mode"]]}
    values = {}
    for f in dataclasses.fields(options_type):
        if f.name in data and data[f.name] is not None:
            value = data[f.name]
            values[f.name] = tuple(value) if isinstance(value, list) else value
    return options_type(**values)


@runtime_checkable
class Suite(Protocol):
    """What the engine and the CLI need of a suite."""

    name: str  # the WorkItem.suite value
    command: str | None  # the CLI command that plans it (several suites may share one)
    options_type: type  # frozen dataclass; fields made with `cli_option` become CLI options
    default_timeout_s: float  # the default --timeout of its command

    def plan(self, options: Any) -> list[WorkItem]:
        """The items a selection names, in a stable order; InputError for a bad selection."""

    def preload(self) -> None:
        """Slow imports a worker can do before it knows its run (may do nothing)."""

    def prepare(self, ctx: Any) -> None:
        """Once per worker, before its first item (ctx: conformance.engine.config.WorkerContext)."""

    def run_item(self, item: WorkItem, ctx: Any) -> Result:
        """Run one item on the device; never touches the store."""


@dataclasses.dataclass(frozen=True)
class ModuleSuite:
    """A Suite whose work lives in modules imported only when used, so that building the CLI
    and planning never import torch: `planner` is "module:function" (options -> items), and
    `runner` a module with `prepare(ctx)`, `run_item(item, ctx)` and optionally `preload()`."""

    name: str
    command: str | None
    options_type: type
    default_timeout_s: float
    planner: str
    runner: str

    def plan(self, options: Any) -> list[WorkItem]:
        module, _, function = self.planner.partition(":")
        return getattr(importlib.import_module(module), function)(options)

    def preload(self) -> None:
        preload = getattr(importlib.import_module(self.runner), "preload", None)
        if preload is not None:
            preload()

    def prepare(self, ctx: Any) -> None:
        importlib.import_module(self.runner).prepare(ctx)

    def run_item(self, item: WorkItem, ctx: Any) -> Result:
        return importlib.import_module(self.runner).run_item(item, ctx)


@lru_cache(maxsize=1)
def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def names() -> list[str]:
    """Every known suite: built-ins first, then plugins."""
    return list(BUILTIN) + sorted(n for n in _entry_points() if n not in BUILTIN)


@lru_cache(maxsize=None)
def get(name: str) -> Suite:
    """The suite called `name` (a WorkItem's `suite` field)."""
    if name in BUILTIN:
        module, _, attribute = BUILTIN[name].partition(":")
        return getattr(importlib.import_module(module), attribute)
    entry = _entry_points().get(name)
    if entry is None:
        raise InputError(f"unknown suite {name!r}; known suites: {', '.join(names())}.")
    return load_plugin(entry, f"suite {name!r}", Suite)


def load_plugin(entry: importlib.metadata.EntryPoint, what: str, kind: type) -> Any:
    """What an entry point names (a class is instantiated), checked to be a `kind`; InputError
    naming the plugin otherwise. The suite and backend registries both load plugins so."""
    try:
        loaded = entry.load()
    except Exception as exc:
        raise InputError(f"the plugin for {what} ({entry.value}) failed to load: {exc}.") from None
    found = loaded() if isinstance(loaded, type) else loaded
    if not isinstance(found, kind):
        raise InputError(f"the plugin for {what} ({entry.value}) is not a {kind.__name__}.")
    return found


def for_command(command: str) -> list[Suite]:
    """The suites a CLI command plans, built-ins first."""
    return [suite for suite in map(get, names()) if suite.command == command]


def plan(command: str, options: Any) -> list[WorkItem]:
    """Every item the suites of `command` plan from `options`, suite after suite."""
    items: list[WorkItem] = []
    for suite in for_command(command):
        items.extend(suite.plan(options))
    return items


def preload_suites(suites: tuple[str, ...]) -> None:
    """Import what the suites need before the run's configuration is known (a prestarted
    worker does this while the parent is still planning). Failures are left for
    `prepare_suites`, which reports them."""
    for name in suites:
        try:
            get(name).preload()
        except Exception:  # noqa: BLE001 - prepare_suites raises it again, with context
            pass
