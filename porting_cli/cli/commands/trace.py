"""`neuron-check trace SCRIPT [-- ARGS]`: where a script spends its device time, line by line.

A thin command over porting_cli/runtime/profiler.py (the run and the per-line rows) and
porting_cli/runtime/profiler_export.py (the formats). Not `profile`, which is about coverage profiles.
"""

from __future__ import annotations

import os

import click

from porting_cli.cli.options import device_option, format_option, sim_profile_option

FORMATS = ("table", "json", "html", "parquet")


@click.command("trace", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("script", metavar="SCRIPT")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- SCRIPT_ARGS...]")
@device_option
@sim_profile_option
@format_option(*FORMATS)
@click.option("-o", "--output", default=None, help="Write to FILE (a folder for --format parquet).")
@click.option("--chrome-trace", default=None, metavar="FILE", help="Also write torch.profiler's Chrome/Perfetto trace.")
@click.option("--warmup", type=click.IntRange(min=0), default=1, show_default=True,
              help="Optimizer steps run before the profiled window.")
@click.option("--steps", type=click.IntRange(min=1), default=2, show_default=True,
              help="Optimizer steps profiled.")
@click.option("--max-steps", type=click.IntRange(min=0), default=None,
              help="Stop the script after N optimizer steps (default: --warmup + --steps; 0: no limit).")
@click.option("--max-seconds", type=click.FloatRange(min=0, min_open=True), default=300.0, show_default=True,
              help="Stop the script after S seconds.")
@click.option("--top", type=click.IntRange(min=1), default=5, show_default=True, help="Bottlenecks listed.")
def command(script: str, script_args: tuple[str, ...], device: str | None, sim_profile: str | None, fmt: str,
            output: str | None, chrome_trace: str | None, warmup: int, steps: int, max_steps: int | None,
            max_seconds: float, top: int) -> int:
    """Profile SCRIPT on the device and link its device time to source lines.

    \b
    neuron-check trace train.py                                  table of the hottest lines
    neuron-check trace train.py --sim-profile p.json --format json
    neuron-check trace train.py --format parquet -o prof/        op events and lines for agents
    neuron-check trace train.py --chrome-trace t.json -- --epochs 1
    """
    from conformance.backends.opening import apply_sim_profile
    from op_db.errors import InputError
    from porting_cli.analysis.project import discover
    from porting_cli.runtime import profiler, profiler_export
    from reports.sanitize import echo

    if not os.path.isfile(script) and not os.path.isdir(script):
        raise InputError(f"{script}: no such script.")
    if fmt == "parquet" and not output:
        raise click.UsageError("--format parquet writes a folder: name it with -o PATH.")
    if sim_profile and device not in (None, "sim") and not str(device).startswith("sim:"):
        raise click.UsageError("--sim-profile applies only to --device sim.")
    if sim_profile:
        apply_sim_profile(sim_profile)  # validated here; the child inherits it through the environment
        device = device or "sim"
    if chrome_trace:
        try:
            os.makedirs(os.path.dirname(os.path.abspath(chrome_trace)), exist_ok=True)
        except OSError as exc:
            raise InputError(f"--chrome-trace {chrome_trace}: cannot create its folder ({exc.strerror}).") from None
    project = discover(script, None)
    entry, root = (project.require_entry(), project.root) if project.is_folder else (script, None)
    found = profiler.run_profile(entry, list(script_args), device=device, warmup=warmup, steps=steps,
                                 max_steps=warmup + steps if max_steps is None else max_steps,
                                 max_seconds=max_seconds, chrome_trace=chrome_trace, root=root, display_base=root)
    if chrome_trace and "events" in found and found["events"] and not os.path.isfile(chrome_trace):
        raise InputError(f"--chrome-trace {chrome_trace}: the profiler did not write it.")
    report = profiler.report(found, top)
    if fmt == "parquet":
        profiler_export.write_parquet(report, found["events"], output)
        echo(f"wrote {output} (schema {profiler_export.PARQUET_SCHEMA_VERSION})")
        return 0
    text = {"table": profiler_export.render_table, "json": profiler_export.render_json,
            "html": profiler_export.render_html}[fmt](report)
    if output:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        echo(text, nl=False)
    return 0
