"""`neuron-check gate`: fail CI on regressions and on failures nobody expected."""

from __future__ import annotations

import os

import click

from porting_cli.cli.options import db_option, format_option


@click.command("gate")
@db_option
@click.option("--baseline", default=None, help="Baseline: a run id, 'latest', or a `report --format json` FILE.json.")
@click.option("--current", default="latest", show_default=True, help="The run to judge: a run id, 'latest', or FILE.json.")
@click.option("--expected-failures", type=click.Path(dir_okay=False), default=None,
              help="YAML manifest of failures that are known and accepted.")
@click.option("--write-expected", type=click.Path(dir_okay=False), default=None,
              help="Write a manifest that expects exactly the current run's failures.")
@click.option("--strict", is_flag=True, help="An expected failure that now passes also fails the gate.")
@click.option("--claims", "claims_path", type=click.Path(dir_okay=False), default=None,
              help="A vendor's compatibility table (CSV or Markdown) to judge the current run against.")
@click.option("--fail-on-claims", is_flag=True, help="With --claims: a claimed row measured failing fails the gate.")
@format_option("text", "json", default="text")
def command(db_path, baseline, current, expected_failures, write_expected, strict, claims_path, fail_on_claims,
            fmt) -> int:
    """Compare a run with a baseline and a manifest; exit 1 when the gate trips.

    \b
    neuron-check gate --baseline last-release.json
    neuron-check gate --baseline 12 --current latest --expected-failures xfail.yaml --strict
    neuron-check gate --write-expected xfail.yaml      manifest of the latest run's failures
    neuron-check gate --claims vendor.md --fail-on-claims   fail where the vendor's Y/CPU_FALLBACK fails
    """
    from reports.gate import evaluate, load_manifest, render_outcome, write_manifest
    from reports.sanitize import dumps_json, echo

    if baseline is None and expected_failures is None and write_expected is None and claims_path is None:
        raise click.UsageError("give --baseline, --expected-failures, --write-expected, or --claims.")
    if fail_on_claims and claims_path is None:
        raise click.UsageError("--fail-on-claims needs --claims TABLE.")
    current_report = _load(db_path, current)
    if claims_path:
        from reports.claims import apply_claims_table

        apply_claims_table(current_report, claims_path)
    if write_expected:
        count = write_manifest(current_report, write_expected)
        echo(f"wrote {count} expected failures to {write_expected}", err=True)
        if baseline is None and expected_failures is None and claims_path is None:
            return 0
    baseline_report = _load(db_path, baseline) if baseline is not None else None
    manifest = load_manifest(expected_failures) if expected_failures else None
    outcome = evaluate(current_report, baseline_report, manifest, strict=strict)
    if fail_on_claims:
        from reports.claims import disagreements

        outcome.claims_failing = disagreements(current_report)
    if manifest is not None and manifest.device and manifest.device != current_report.run.get("device"):
        echo(f"note: the manifest was written for device {manifest.device!r}, "
                   f"the current run is on {current_report.run.get('device')!r}.", err=True)
    if fmt == "json":
        echo(dumps_json(outcome.to_json(), indent=2))
    else:
        if current_report.simulated:
            echo("note: the current run is SIMULATED (sim device).")
        if claims_path:
            verdicts = current_report.claims["verdicts"]
            echo("claims: " + ", ".join(f"{v} {n}" for v, n in verdicts.items() if n))
        echo(render_outcome(outcome))
    return 1 if outcome.tripped else 0


def _load(db_path, spec: str):
    """A run of the store, or a JSON report file when SPEC names one."""
    from op_db.store import open_for_reading
    from reports.model import report_from_json, report_from_store

    if spec.lower().endswith(".json") or os.path.sep in spec or os.path.isfile(spec):
        return report_from_json(spec)
    with open_for_reading(db_path) as store:
        return report_from_store(store, spec)
