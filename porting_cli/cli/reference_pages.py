"""The manual's reference pages, generated from the code they describe.

The CLI reference walks the click group itself (every command, argument and option with its
default and help text, as `--help` prints them); the rule table is `porting_cli.analysis.scan.RULES`; the
status pages are the closed status set and `conformance.outcome.RULES`. The docs build
(`docs/hooks.py`) calls `reference_pages()` at build time, so no copy of them is committed and
none can drift from `--help`.
"""

from __future__ import annotations

import inspect

import click

#: docs path -> the function that writes that page.
PAGES = {
    "reference/cli.md": "cli_reference_markdown",
    "reference/rules.md": "rules_page_markdown",
    "reference/statuses.md": "statuses_page_markdown",
}


def reference_pages() -> dict[str, str]:
    """Every generated page: docs path -> Markdown."""
    return {path: globals()[name]() for path, name in PAGES.items()}


def _cell(text: str) -> str:
    """Text fit for one Markdown table cell: one line, pipes escaped, HTML inert."""
    flat = " ".join(str(text).split())
    return flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _code_cell(text: str) -> str:
    """Text as code in a table cell. A backslash-escaped pipe would show its backslash inside a
    Markdown code span, so the cell is HTML with the pipe as a character reference."""
    return f"<code>{_cell(text).replace(chr(92) + '|', '&#124;')}</code>"


def _help_blocks(text: str) -> str:
    """A click help text as Markdown: click's `\\b` paragraphs (kept verbatim by `--help`) become
    code blocks, the other paragraphs stay prose."""
    out = []
    for paragraph in inspect.cleandoc(text or "").split("\n\n"):
        if paragraph.startswith("\b"):
            body = paragraph[1:].strip("\n")
            out.append("```text\n" + body + "\n```")
        elif paragraph.strip():
            out.append(" ".join(paragraph.split()).replace("<", "&lt;"))
    return "\n\n".join(out)


def _subcommands(group: click.Group, ctx: click.Context) -> list[tuple[str, click.Command]]:
    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            found.append((name, command))
    return found


def _command_section(command: click.Command, ctx: click.Context, level: int) -> list[str]:
    path = ctx.command_path
    lines = [f"{'#' * level} `{path}`", ""]
    if command.deprecated:
        lines += ["*Deprecated.*", ""]
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines += ["```text", f"Usage: {path} {usage}".rstrip(), "```", ""]
    if command.help:
        lines += [_help_blocks(command.help), ""]
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    if arguments:
        lines += ["| argument | required |", "|---|---|"]
        for argument in arguments:
            try:
                metavar = argument.make_metavar(ctx)
            except TypeError:  # click < 8.2 takes no context
                metavar = argument.make_metavar()
            lines.append(f"| {_code_cell(metavar)} | {'yes' if argument.required else 'no'} |")
        lines.append("")
    records = [p.get_help_record(ctx) for p in command.get_params(ctx) if isinstance(p, click.Option)]
    records = [r for r in records if r is not None]  # hidden options have none
    if records:
        lines += ["| option | what it does |", "|---|---|"]
        for names, text in records:
            lines.append(f"| {_code_cell(names)} | {_cell(text)} |")
        lines.append("")
    if isinstance(command, click.Group):
        for name, sub in _subcommands(command, ctx):
            with click.Context(sub, info_name=name, parent=ctx, show_default=True) as sub_ctx:
                lines += _command_section(sub, sub_ctx, level + 1)
    return lines


def cli_reference_markdown(group: click.Group | None = None) -> str:
    """Every command of `neuron-check` (plugin suites included), as its `--help` describes it,
    with every default shown."""
    if group is None:
        from porting_cli.cli.app import main as group
    lines = [
        "# Command reference",
        "",
        "Generated from the command definitions when the manual is built, so it says what",
        "`neuron-check COMMAND --help` says (with every default shown). Exit codes: 0 done,",
        "1 a gate or `--fail-on` condition tripped, 2 usage or input error, 3 internal error.",
        "`neuron-check path/to/script.py ...` (or a folder) is short for `neuron-check port ...`.",
        "",
    ]
    with click.Context(group, info_name="neuron-check", show_default=True) as ctx:
        lines += _command_section(group, ctx, 2)
    return "\n".join(lines).rstrip() + "\n"


def rules_page_markdown() -> str:
    """The porting check's static rules, from the rule table."""
    from porting_cli.analysis.scan.rules import EFFORTS, RULES, rules_markdown

    fixable = sum(rule.fixable for rule in RULES)
    blocking = ", ".join(rule.id for rule in RULES if rule.blocks)
    return "\n".join([
        "# Porting rules",
        "",
        "Generated from `porting_cli/analysis/scan/rules.py` when the manual is built. Each rule has an",
        "id (`NCfnn`, f the family), a severity, an effort (SYCLomatic's scale: "
        + " / ".join(f"`{e}`" for e in EFFORTS) + ") and",
        f"a message naming the device-agnostic replacement. {fixable} of the {len(RULES)} rules can",
        "be fixed by `neuron-check SCRIPT --fix` / `--diff` (*auto-fix*: yes) in some or all of the",
        "places they fire; each finding says whether *it* is fixable. Findings of",
        f"{blocking} make the verdict `blocked` (the port needs new code).",
        "Rule `NCRT1` is the runtime check's: a line that ran on the target only because the",
        "trace remapped it (see [the porting check](../porting.md)).",
        "",
        rules_markdown().rstrip(),
        "",
    ])


def statuses_page_markdown() -> str:
    """The closed status set and the rule that maps what an item observed to a status."""
    from conformance.outcome import ENGINE_RULES, RULES, UNSUPPORTED_MARKERS
    from op_db.records import FAILING, STATUS_MEANINGS, WORKING, Status

    lines = [
        "# Statuses",
        "",
        "Generated from `op_db/records.py` (the closed status set) and `conformance/outcome.py`",
        "(the one rule every suite applies) when the manual is built.",
        "",
        "| status | meaning | counts as |",
        "|---|---|---|",
    ]
    for status in Status:
        counts = "working" if status in WORKING else "failing" if status in FAILING else "not judged"
        lines.append(f"| `{status.value}` | {_cell(STATUS_MEANINGS[status])} | {counts} |")
    lines += [
        "",
        "Pass rates count *working* items over *working* and *failing* ones; SKIP and REF_ERROR",
        "say nothing about the backend and are left out.",
        "",
        "## From observation to status",
        "",
        "Every suite (`ops`, FP8, `models`, `dist`, and any plugin suite) turns what it observed",
        "into a status through one function, `conformance.outcome.status_of`, which applies these",
        "rows in order; the engine alone decides the last rows, for workers that died or hung.",
        "",
        "| what was observed | status |",
        "|---|---|",
    ]
    for observed, status in (*RULES, *ENGINE_RULES):
        lines.append(f"| {_cell(observed)} | `{status.value}` |")
    lines += [
        "",
        "A device exception is UNSUPPORTED when it is a `NotImplementedError` or its text holds",
        "one of: " + ", ".join(f'"{_cell(m)}"' for m in UNSUPPORTED_MARKERS) + "; any other is ERROR.",
        "The comparison is [the numerics rule](../numerics.md).",
        "",
    ]
    return "\n".join(lines)

