"""`neuron-check models`: tiny Transformers models of every architecture on a backend, against CPU."""

from __future__ import annotations

import dataclasses

import click

from conformance.models.plan import ModelOptions
from porting_cli.options import format_option
from porting_cli.suite_cli import suite_command


HELP = """Build tiny Transformers models from their default configs and run them on a device:
logits (and with --grad gradients, with --generate greedy tokens) against CPU.

\b
neuron-check models --list --task causal-lm
neuron-check models --device sim --arch llama,gpt2,bert,t5,vit --dtype fp32,bf16
neuron-check models --device neuron --task causal-lm --grad --generate -j 4 --fail-on MISMATCH,ERROR
neuron-check models --resume 7
"""
LISTING = (
    click.option("--list", "list_only", is_flag=True, help="List the model types with their task; run nothing."),
    click.option("--check-build", is_flag=True, help="With --list: build every listed type tiny (in worker processes) "
                 "and show its build status."),
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
    _list(list(suite_values["archs"]), list(suite_values["tasks"]), listing.check_build, listing.fmt, run.jobs)
    return 0


command = suite_command("models", ModelOptions, help=HELP, default_timeout=300.0, extra_params=LISTING,
                        intercept=_list_if_asked)


def _list(archs: list[str], tasks: list[str], check_build: bool, fmt: str, jobs: int) -> None:
    from conformance.models import zoo

    entries = zoo.select(archs, tasks)
    rows = [entry.to_dict() for entry in entries]
    if check_build:
        from conformance.models.census import OK, build_status

        status = build_status([e.model_type for e in entries], jobs=jobs)
        for row in rows:
            row["build"], seconds = status.get(row["model_type"], ("build failed: worker lost", 0.0))
            row["build_s"] = round(seconds, 3)
    summary: dict[str, dict[str, int]] = {}
    for row in rows:
        counts = summary.setdefault(row["task"], {"types": 0, **({"built": 0} if check_build else {})})
        counts["types"] += 1
        if check_build and row["build"] == OK:
            counts["built"] += 1
    from reports.sanitize import dumps_json, echo, for_terminal

    if fmt == "json":
        echo(dumps_json({"schema": 1, "models": rows, "summary": summary}, indent=2))
        return
    from tabulate import tabulate

    headers = ["model_type", "task", "class"] + (["build"] if check_build else [])
    table = [[r["model_type"], r["task"], r["class_name"]]
             + ([for_terminal(_short(r["build"]), one_line=True)] if check_build else []) for r in rows]
    echo(tabulate(table, headers=headers))
    totals = [[task, c["types"]] + ([c["built"]] if check_build else []) for task, c in summary.items()]
    echo("")
    echo(tabulate(totals, headers=["task", "types"] + (["built"] if check_build else [])))


def _short(text: str, limit: int = 90) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
