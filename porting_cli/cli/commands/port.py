"""`neuron-check port PATH [options] [-- SCRIPT ARGS]` (also `neuron-check PATH ...`).

What stops the script (or the project: PATH a folder) on the backend, how much work the port
is, and the patch. In project mode every Python file is scanned (porting_cli/analysis/project.py), the
runtime check runs the entry script, and paths are relative to the project root. With
--static-only nothing heavy is imported (no torch); the runtime check imports torch only in its
child process and in the parent's reading of --against profiles.
"""

from __future__ import annotations

import os
import sys

import click

from porting_cli.cli.options import db_option, device_option, format_option, sim_profile_option

FORMATS = ("table", "md", "html", "json", "sarif")
DEFAULT_MAX_SECONDS = 300.0


@click.command("port", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("script", metavar="PATH")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- SCRIPT_ARGS...]")
@click.option("--static-only", is_flag=True, help="Only the static scan: do not run the script.")
@click.option("--entry", metavar="FILE", default=None,
              help="The script the runtime check runs (default: PATH itself, or for a folder its "
                   "top-level train.py or main.py when exactly one exists).")
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
@click.option("--verify", is_flag=True,
              help="With --fix: run each fixed file's import on the device (default sim) and its original's; "
                   "exit 1 when a fix breaks the import.")
def command(script: str, script_args: tuple[str, ...], static_only: bool, entry: str | None, device: str | None,
            sim_profile: str | None, against: str | None, db_path: str | None, max_steps: int,
            max_seconds: float, fmt: str, output: str | None, fail_on: str | None,
            apply_fix: bool, show_diff: bool, verify: bool) -> int:
    """Porting check: CUDA-specific code, ops the backend lacks, the effort, and the patch.

    \b
    neuron-check examples/gpt_amp_train.py                   static scan + run on the default device
    neuron-check examples/gpt_amp_train.py --static-only     findings and patch, no run
    neuron-check train.py --sim-profile p.json -- --epochs 1  dry-run against a coverage profile
    neuron-check train.py --format sarif -o port.sarif       for GitHub code scanning
    neuron-check train.py --diff | --fix                     the patch, or apply it (keeps .orig)
    neuron-check train.py --fix --verify                     apply it, then prove each fixed file imports
    neuron-check my_repo/ --entry scripts/train.py           project mode: every file, one verdict
    """
    from porting_cli.analysis.fix import fix_file
    from porting_cli.analysis.project import discover

    if apply_fix and show_diff:
        raise click.UsageError("--fix and --diff exclude each other: --diff shows what --fix would write.")
    if static_only and against:
        raise click.UsageError("--against predicts the status of the ops a run records, and --static-only "
                               "runs nothing: drop one of them.")
    if verify and (static_only or not apply_fix):
        raise click.UsageError("--verify runs what --fix writes on the device: give it with --fix and "
                               "without --static-only.")
    if verify and fmt not in ("table", "json"):
        raise click.UsageError("--verify prints a table or JSON: use --format table or --format json.")
    project = discover(script, entry)
    if verify:
        return _fix_and_verify(project, script, list(script_args), device, sim_profile, fmt, output)
    if project.is_folder:
        return _project(project, list(script_args), static_only, device, sim_profile, against, db_path,
                        max_steps, max_seconds, fmt, output, fail_on, apply_fix, show_diff)
    from porting_cli.analysis.scan import ScanError
    from porting_cli.analysis.batch_scan import scan_paths

    scanned = scan_paths([(script, script)])[0]  # through the content cache: porting_cli.analysis.scan.cache
    if isinstance(scanned, ScanError):  # a missing, unreadable or broken file
        raise scanned
    if show_diff or apply_fix:
        return _fix(script, apply_fix, fix_file)
    scan, patch = scanned.result, scanned.fix.diff()
    trace = reach = prediction = None
    if not static_only:
        run = project.require_entry() if entry else script
        trace, reach, prediction = _runtime(run, list(script_args), device, sim_profile, against,
                                            db_path, max_steps, max_seconds)
    from porting_cli.cli.port_report import build_report, exit_code

    report = build_report(_display(script), scan, patch, trace, prediction=prediction, reach=reach,
                          max_steps=max_steps, max_seconds=max_seconds).to_dict()
    _emit(report, fmt, output)
    return exit_code(report["verdict"], fail_on)


def _project(project, args: list[str], static_only: bool, device: str | None, sim_profile: str | None,
             against: str | None, db_path: str | None, max_steps: int, max_seconds: float, fmt: str,
             output: str | None, fail_on: str | None, apply_fix: bool, show_diff: bool) -> int:
    """Project mode: scan every file, run the entry script, one report for the whole folder."""
    from porting_cli.analysis.fix import fix_file
    from porting_cli.cli.port_report import build_report, exit_code
    from porting_cli.analysis.project import scan_project

    entry = None if static_only or show_diff or apply_fix else project.require_entry()  # before any work
    scanned = scan_project(project)
    from reports.sanitize import echo

    for warning in scanned.warnings:
        echo(f"neuron-check: warning: {warning}", err=True)  # file names are untrusted text
    if apply_fix:
        fixable = [f["path"] for f in scanned.files if f["fixable"]]
        for rel in fixable:
            _fix(project.path(rel), True, fix_file)
        if not fixable:
            echo(f"{_display(project.root)}: nothing to fix automatically.")
        return 0
    patch = scanned.patch
    if show_diff:
        _print_patch(patch)
        return 0
    trace = reach = prediction = None
    if entry is not None:
        trace, reach, prediction = _runtime(entry, args, device, sim_profile, against, db_path,
                                            max_steps, max_seconds, root=project.root)
    report = build_report(_display(project.root), scanned.result, patch, trace, prediction=prediction,
                          reach=reach, max_steps=max_steps, max_seconds=max_seconds, files=scanned.files,
                          warnings=scanned.warnings, base_dir=project.root).to_dict()
    _emit(report, fmt, output)
    return exit_code(report["verdict"], fail_on)


def _fix_and_verify(project, script: str, args: list[str], device: str | None, sim_profile: str | None,
                    fmt: str, output: str | None) -> int:
    """--fix --verify: write the fixes, then run each fixed file's import and its original's on
    the device (porting_cli/runtime/verify.py); exit 1 when a fix is defective."""
    from porting_cli.analysis.fix import fix_file
    from porting_cli.runtime.verify import verify_fixes
    from reports.render import fix_verify

    if project.is_folder:
        from porting_cli.analysis.project import scan_project

        scanned = scan_project(project)
        paths = [project.path(f["path"]) for f in scanned.files if f["fixable"]]
    else:
        from porting_cli.analysis.batch_scan import scan_paths
        from porting_cli.analysis.scan import ScanError

        scanned = scan_paths([(script, script)])[0]
        if isinstance(scanned, ScanError):
            raise scanned
        paths = [script]
    device = _with_profile(device, sim_profile) or "sim"
    base = project.root if project.is_folder else None
    results = [result for result in (fix_file(path, write=True) for path in paths) if result.changed]
    checked = verify_fixes(results, root=base, device=device, argv=args, display_base=base)
    fixes = [{"path": verdict.path, "applied": sorted(f.rule_id for f in result.applied),
              "remaining": len(result.remaining)} for verdict, result in zip(checked.files, results)]
    doc = fix_verify.document(_display(project.root if project.is_folder else script), fixes, checked.to_dict())
    _write(fix_verify.render(doc, fmt), output, f"{fmt} fix verification, verdict {checked.verdict}")
    return 1 if checked.defective else 0


def _with_profile(device: str | None, sim_profile: str | None) -> str | None:
    """The device to run on once --sim-profile is applied (it implies sim)."""
    from conformance.backends.opening import apply_sim_profile

    if sim_profile and device not in (None, "sim") and not str(device).startswith("sim:"):
        raise click.UsageError("--sim-profile applies only to --device sim.")
    if sim_profile:
        apply_sim_profile(sim_profile)  # validated here; the child inherits it through the environment
        device = device or "sim"
    return device


def _display(path: str) -> str:
    rel = os.path.relpath(os.path.abspath(path))
    return path if rel.startswith("..") else rel


def _print_patch(patch: str) -> None:
    from reports.sanitize import echo

    if sys.stdout.isatty():
        echo(patch, nl=False)  # to be read: the script's lines are untrusted text
    else:
        sys.stdout.write(patch)  # to be applied (`| git apply`): byte for byte


def _fix(script: str, write: bool, fix_file) -> int:
    from reports.sanitize import echo

    result = fix_file(script, write=write)
    if not write:
        _print_patch(result.diff())
        return 0
    if not result.changed:
        echo(f"{script}: nothing to fix automatically ({len(result.remaining)} finding(s) need a person).")
        return 0
    echo(f"{script}: applied {len(result.applied)} fix(es); the original is kept as {script}.orig; "
               f"{len(result.remaining)} finding(s) need a person.")
    return 0


def _runtime(script: str, args: list[str], device: str | None, sim_profile: str | None,
             against: str | None, db_path: str | None, max_steps: int, max_seconds: float,
             root: str | None = None):
    """The trace (and the CPU reach run for --against). `root`: project mode's folder, which
    is both the user's code and the base of the sites' paths."""
    from pathlib import Path

    from conformance.engine.progress import Progress
    from op_db.text import plural
    from porting_cli.runtime.prediction import Prediction
    from porting_cli.runtime.trace import run_trace

    device = _with_profile(device, sim_profile)
    prediction = Prediction.load(against, db_path) if against else None
    limits = f"{plural(max_steps, 'step')}, " if max_steps else ""
    limits += f"at most {max_seconds:g} s" if max_seconds else "no time limit"
    with Progress(f"running {Path(script).name} on {device or 'the default device'} ({limits})"):
        trace = run_trace(script, args, device=device, max_steps=max_steps, max_seconds=max_seconds,
                          root=root, display_base=root)
    reach = None
    if prediction is not None and trace.outcome in ("raised", "crashed"):
        # Ops after the failure were never reached live: run the script on the CPU (same
        # limits) to learn them; the table shows their status as predicted by --against.
        with Progress(f"running {Path(script).name} on the CPU to find the ops after the failure"):
            reach = run_trace(script, args, device="cpu", max_steps=max_steps, max_seconds=max_seconds,
                              divergence=False, root=root, display_base=root)
    return trace, reach, prediction


def _emit(report: dict, fmt: str, output: str | None) -> None:
    from reports.render import porting

    _write(porting.render(report, fmt), output, f"{fmt} porting report, verdict {report['verdict']}")


def _write(text: str, output: str | None, what: str) -> None:
    from reports.sanitize import echo

    if output:
        try:
            with open(output, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            from op_db.errors import InputError

            raise InputError(f"cannot write {output}: {exc.strerror or exc}.") from None
        echo(f"wrote {output}: {what}", err=True)
    else:
        echo(text, nl=not text.endswith("\n"))
