"""`neuron-check port SCRIPT.py [options] [-- SCRIPT ARGS]` (also `neuron-check SCRIPT.py ...`).

What stops the script on the backend, how much work the port is, and the patch. With
--static-only nothing heavy is imported (no torch); the runtime check imports torch only in its
child process and in the parent's reading of --against profiles.
"""

from __future__ import annotations

import os
import sys

import click

from porting_cli.options import db_option, device_option, format_option, sim_profile_option

FORMATS = ("table", "md", "html", "json", "sarif")
DEFAULT_MAX_SECONDS = 300.0


@click.command("port", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("script", metavar="SCRIPT.py")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- SCRIPT_ARGS...]")
@click.option("--static-only", is_flag=True, help="Only the static scan: do not run the script.")
@device_option
@sim_profile_option
@click.option("--against", metavar="RUN|PROFILE.json", default=None,
              help="Predict each op's status from a stored run (id or 'latest', in --db) or a sim profile.")
@db_option
@click.option("--max-steps", type=click.IntRange(min=0), default=2, show_default=True,
              help="Stop the script after N optimizer steps (0: no limit).")
@click.option("--max-seconds", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_MAX_SECONDS,
              show_default=True, help="Stop the script after S seconds; the report is then partial.")
@format_option(*FORMATS)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report to FILE instead of standard output.")
@click.option("--fail-on", type=click.Choice(["blocked", "fixes"]), default=None,
              help="Exit 1 when the verdict is blocked (blocked) or anything but ready (fixes).")
@click.option("--fix", "apply_fix", is_flag=True, help="Rewrite SCRIPT.py in place (keeps SCRIPT.py.orig).")
@click.option("--diff", "show_diff", is_flag=True, help="Print the unified diff of the fixes; change nothing.")
def command(script: str, script_args: tuple[str, ...], static_only: bool, device: str | None,
            sim_profile: str | None, against: str | None, db_path: str | None, max_steps: int,
            max_seconds: float, fmt: str, output: str | None, fail_on: str | None,
            apply_fix: bool, show_diff: bool) -> int:
    """Porting check: CUDA-specific code, ops the backend lacks, the effort, and the patch.

    \b
    neuron-check examples/gpt_amp_train.py                   static scan + run on the default device
    neuron-check examples/gpt_amp_train.py --static-only     findings and patch, no run
    neuron-check train.py --sim-profile p.json -- --epochs 1  dry-run against a coverage profile
    neuron-check train.py --format sarif -o port.sarif       for GitHub code scanning
    neuron-check train.py --diff | --fix                     the patch, or apply it (keeps .orig)
    """
    from porting_cli.fix import fix_file
    from porting_cli.scan import scan_file

    if apply_fix and show_diff:
        raise click.UsageError("--fix and --diff exclude each other: --diff shows what --fix would write.")
    scan = scan_file(script)  # ScanError (an InputError) for a missing, unreadable or broken file
    if show_diff or apply_fix:
        return _fix(script, apply_fix, fix_file)
    patch = fix_file(script, write=False).diff()
    trace = reach = prediction = None
    if not static_only:
        trace, reach, prediction = _runtime(script, list(script_args), device, sim_profile, against,
                                            db_path, max_steps, max_seconds)
    from porting_cli.port import build_report, exit_code

    report = build_report(_display(script), scan, patch, trace, prediction=prediction, reach=reach,
                          max_steps=max_steps, max_seconds=max_seconds).to_dict()
    _emit(report, fmt, output)
    return exit_code(report["verdict"], fail_on)


def _display(path: str) -> str:
    rel = os.path.relpath(os.path.abspath(path))
    return path if rel.startswith("..") else rel


def _fix(script: str, write: bool, fix_file) -> int:
    from reports.sanitize import echo

    result = fix_file(script, write=write)
    if not write:
        if sys.stdout.isatty():
            echo(result.diff(), nl=False)  # to be read: the script's lines are untrusted text
        else:
            sys.stdout.write(result.diff())  # to be applied (`| git apply`): byte for byte
        return 0
    if not result.changed:
        echo(f"{script}: nothing to fix automatically ({len(result.remaining)} finding(s) need a person).")
        return 0
    echo(f"{script}: applied {len(result.applied)} fix(es); the original is kept as {script}.orig; "
               f"{len(result.remaining)} finding(s) need a person.")
    return 0


def _runtime(script: str, args: list[str], device: str | None, sim_profile: str | None,
             against: str | None, db_path: str | None, max_steps: int, max_seconds: float):
    from porting_cli.options import apply_sim_profile
    from porting_cli.trace import Prediction, run_trace

    if sim_profile and device not in (None, "sim") and not str(device).startswith("sim:"):
        raise click.UsageError("--sim-profile applies only to --device sim.")
    if sim_profile:
        apply_sim_profile(sim_profile)  # validated here; the child inherits it through the environment
        device = device or "sim"
    prediction = Prediction.load(against, db_path) if against else None
    trace = run_trace(script, args, device=device, max_steps=max_steps, max_seconds=max_seconds)
    reach = None
    if prediction is not None and trace.outcome in ("raised", "crashed"):
        # Ops after the failure were never reached live: run the script on the CPU (same
        # limits) to learn them; the table shows their status as predicted by --against.
        reach = run_trace(script, args, device="cpu", max_steps=max_steps, max_seconds=max_seconds,
                          divergence=False)
    return trace, reach, prediction


def _emit(report: dict, fmt: str, output: str | None) -> None:
    from reports.render import porting
    from reports.sanitize import echo

    text = porting.render(report, fmt)
    if output:
        try:
            with open(output, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            from op_db.errors import InputError

            raise InputError(f"cannot write {output}: {exc.strerror or exc}.") from None
        echo(f"{report['verdict']}: report written to {output}", err=True)
    else:
        echo(text, nl=not text.endswith("\n"))
