"""`neuron-check models`: tiny Transformers models of every architecture on a backend, against CPU."""

from __future__ import annotations

import dataclasses

import click

from conformance.models.plan import ModelOptions
from porting_cli.cli.options import format_option
from porting_cli.cli.suite_cli import suite_command


HELP = """Build tiny Transformers models (or, with --library diffusers, every Diffusers model class) from
their default configs and run them on a device: outputs (and with --grad gradients, with --generate
greedy tokens, with --step one denoising step) against CPU.

\b
neuron-check models --list --task causal-lm
neuron-check models --device sim --arch llama,gpt2,bert,t5,vit --dtype fp32,bf16
neuron-check models --device neuron --task causal-lm --grad --generate -j 4 --fail-on MISMATCH,ERROR
neuron-check models --resume 7
neuron-check models --library diffusers --device sim --arch 'Flux*,UNet2DConditionModel' --dtype fp32
neuron-check models --library diffusers --list --check-build -j 2
"""
LISTING = (
    click.option("--list", "list_only", is_flag=True, help="List the model types with their task; run nothing."),
    click.option("--check-build", is_flag=True, help="With --list: build every listed (type, task) pair tiny and run "
                 "one CPU forward (in worker processes); print each failure's cause, the causes table and the "
                 "aten overloads exercised in total and per task."),
    format_option("table", "json"),
)


@dataclasses.dataclass(frozen=True)
class Listing:
    """The options of the listing mode, which runs nothing."""

    list_only: bool
    check_build: bool
    fmt: str


def _list_if_asked(extras: dict, suite_values: dict, run) -> int | None:
    """`--list` / `--check-build` answer instead of a run."""
    listing = Listing(**extras)
    if not (listing.list_only or listing.check_build):
        return None
    _list(list(suite_values["archs"]), list(suite_values["tasks"]), listing.check_build, listing.fmt, run.jobs,
          library=suite_values.get("library") or "transformers", families=list(suite_values.get("families") or ()))
    return 0


command = suite_command("models", ModelOptions, help=HELP, default_timeout=300.0, extra_params=LISTING,
                        intercept=_list_if_asked)


def _list(archs: list[str], tasks: list[str], check_build: bool, fmt: str, jobs: int,
          library: str = "transformers", families: list[str] | None = None) -> None:
    from op_db.errors import InputError
    from reports.sanitize import dumps_json, echo

    if families and library != "diffusers":
        raise InputError(f"--family does not apply to --library {library}.")
    if tasks and library == "diffusers":
        raise InputError("--task does not apply to --library diffusers.")
    if library == "diffusers":
        from conformance.models.diffusers import zoo as diffusers_zoo

        entries = diffusers_zoo.select(archs, families)
    else:
        from conformance.models import zoo

        entries = zoo.select(archs, tasks)
    rows = [entry.to_dict() for entry in entries]
    summary = None
    if check_build:
        from conformance.engine.progress import Estimate, Progress
        from conformance.models.census import census
        from conformance.models.census_report import summarise

        checker = None
        if library == "diffusers":
            from conformance.models.diffusers.census import check_class as checker
        subjects = [e.subject for e in entries]
        # Censuses are not stored, so the estimate starts from this census's own pair times.
        with Progress("pairs", len(subjects), Estimate(subjects, workers=jobs)) as bar:
            statuses = census(subjects, jobs=jobs, library=library, checker=checker,
                              on_pair=lambda pair: bar.advance(pair.subject, pair.seconds))
        summary = summarise(entries, statuses)
        for row in rows:
            found = statuses[row["subject"]]
            row.update(build=found.status, cause=found.cause, build_s=round(found.seconds, 3), aten_ops=len(found.ops),
                       ops=list(found.ops))  # what `report --zoo` ranks blocking ops by
    if fmt == "json":
        echo(dumps_json({"schema": 2, "library": library, "models": rows, **({"census": summary.to_dict()} if summary else {})}, indent=2))
        return
    from conformance.models.census_report import render_listing
    from reports.sanitize import for_terminal

    echo(render_listing(rows, summary, lambda text: for_terminal(text, one_line=True),
                        group="family" if library == "diffusers" else "task"))


