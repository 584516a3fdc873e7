"""The `neuron-check` command group.

Commands live in `porting_cli/cli/commands/`, one module each, and are imported
only when used, so `neuron-check --help` and the static scan never import
torch. `neuron-check path/to/script.py ...` is routed to the `port` command.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from op_db.errors import InputError

# Command name -> module under porting_cli.cli.commands that defines `command`.
COMMANDS = {
    "port": "port",
    "ops": "ops",
    "models": "models",
    "dist": "dist",
    "kernels": "kernels",
    "quant": "quant",
    "flex-attention": "flex",
    "devices": "devices",
    "runs": "runs",
    "report": "report",
    "gate": "gate",
    "merge": "merge",
    "dashboard": "dashboard",
    "coverage": "coverage",
    "profile": "profile",
    "claims": "claims",
    "trace": "trace",
}

EXIT_OK, EXIT_TRIPPED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


def _looks_like_script(arg: str) -> bool:
    """A .py file, a path, or a folder (project mode)."""
    return arg.endswith(".py") or (os.path.sep in arg and not arg.startswith("-")) or os.path.isdir(arg)


def route_script(args: list[str]) -> list[str]:
    """`neuron-check [opts] model.py|folder ...` means `neuron-check [opts] port model.py|folder ...`."""
    for index, arg in enumerate(args):
        if arg.startswith("-"):
            continue
        if arg not in COMMANDS and _looks_like_script(arg):
            return [*args[:index], "port", *args[index:]]
        break
    return args


class NeuronCheckGroup(click.Group):
    """Lazy command loading, script routing and the error convention."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from porting_cli.cli.suite_cli import plugin_commands

        return sorted(set(COMMANDS) | set(plugin_commands()))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        module_name = COMMANDS.get(name)
        if module_name is None:
            from porting_cli.cli.suite_cli import plugin_commands

            return plugin_commands().get(name)  # a suite from the `neuron_check.suites` entry points
        try:
            module = importlib.import_module(f"porting_cli.cli.commands.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"porting_cli.cli.commands.{module_name}":
                return None
            raise
        return module.command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, route_script(args))

    def main(self, *args, **kwargs):  # type: ignore[override]
        from reports.sanitize import for_terminal, tolerant_streams

        kwargs.setdefault("standalone_mode", False)
        tolerant_streams()  # a report never dies on a terminal that cannot encode it
        debug = "--debug" in sys.argv[1:] or bool(os.environ.get("NEURON_CHECK_DEBUG"))
        from conformance.engine.lifeline import exit_status, interrupt_on_sigterm

        interrupt_on_sigterm()  # SIGTERM stops like Ctrl-C, with exit status 143
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            # One line, like every other error: click's own three-line usage block is noise in
            # a CI log, and the message quotes what was typed, so it is escaped.
            where = exc.ctx.command_path if isinstance(exc, click.UsageError) and exc.ctx else None
            hint = f" (see '{where} --help')" if where else ""
            message = for_terminal(exc.format_message()).rstrip(".")
            click.echo(f"neuron-check: error: {message}{hint}.", err=True)
            sys.exit(EXIT_USAGE if exc.exit_code == 2 else exc.exit_code)
        except click.Abort as exc:  # click's wrapping of a KeyboardInterrupt (or of EOF at a prompt)
            click.echo("neuron-check: interrupted.", err=True)
            sys.exit(exit_status(exc.__cause__ or KeyboardInterrupt()))
        except InputError as exc:
            if debug:
                raise
            click.echo(f"neuron-check: error: {for_terminal(exc)}", err=True)  # errors quote user input
            sys.exit(EXIT_USAGE)
        except KeyboardInterrupt as exc:
            click.echo("neuron-check: interrupted.", err=True)
            sys.exit(exit_status(exc))
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            if debug:
                raise
            click.echo(
                f"neuron-check: internal error: {type(exc).__name__}: {for_terminal(exc)} "
                "(rerun with --debug for the traceback).",
                err=True,
            )
            sys.exit(EXIT_INTERNAL)
        sys.exit(result if isinstance(result, int) else EXIT_OK)


@click.group(cls=NeuronCheckGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-sentence errors.")
@click.version_option(package_name="neuron-check", prog_name="neuron-check")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Operator and model conformance for PyTorch accelerator backends, and the porting check.

    \b
    neuron-check examples/gpt_amp_train.py       what stops this script on the backend
    neuron-check ops --device sim --ops add,mul  OpInfo suite against CPU
    neuron-check models --arch llama,gpt2        tiny Transformers models against CPU
    neuron-check report --format html -o r.html  coverage report of the latest run
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    if debug:
        os.environ["NEURON_CHECK_DEBUG"] = "1"  # workers show third-party noise too
    from conformance.engine.import_noise import silence_known_noise

    silence_known_noise()


def console_main() -> None:
    """The process entry point (the `neuron-check` script and `python -m porting_cli`): the
    command group, then `exit_process` with its status. In-process callers (tests,
    CliRunner) call `main` and get its SystemExit instead."""
    try:
        main(prog_name="neuron-check")
    except SystemExit as exc:
        exit_process(exc.code)


def exit_process(code: int | str | None) -> None:
    """End the process as `sys.exit(code)` would, without the interpreter's teardown.

    Tearing down an interpreter that has imported torch takes about a second (freeing every
    module and torch's registrations), after the command is done and its output written:
    every `neuron-check ops` run paid it. What a normal exit does that matters still happens:
    non-daemon threads are waited for, atexit handlers run (logging, multiprocessing's
    children, temporary folders, Ray), the standard streams are flushed.
    """
    import atexit
    import threading

    if code is None:
        status = EXIT_OK
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("text") prints the text and exits 1
        print(code, file=sys.stderr)
        status = 1
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be written
            pass
    os._exit(status % 256)  # as the OS reports sys.exit's status
