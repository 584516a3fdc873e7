"""The generated reference pages say what the code does, and no page says otherwise."""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from conformance.outcome import ENGINE_RULES, RULES as OUTCOME_RULES
from op_db.records import STATUS_MEANINGS, Status
from porting_cli.cli.app import main
from porting_cli.cli.reference_pages import (
    PAGES,
    cli_reference_markdown,
    reference_pages,
    rules_page_markdown,
    statuses_page_markdown,
)
from porting_cli.analysis.scan import RULES, scan_file

sys.path.insert(0, str(Path(__file__).resolve().parent))  # --import-mode=importlib: the helper module
from doc_examples import doc_pages  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "porting_cli" / "fixtures"


def _commands(group: click.Group, ctx: click.Context):
    """(command path, command, context) of every command below `group`, recursively."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        sub_ctx = click.Context(command, info_name=name, parent=ctx)
        yield sub_ctx.command_path, command, sub_ctx
        if isinstance(command, click.Group):
            yield from _commands(command, sub_ctx)


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_cli_reference_has_every_command_option_default_and_help():
    page = cli_reference_markdown()
    ctx = click.Context(main, info_name="neuron-check")
    paths = []
    for path, command, _ in _commands(main, ctx):
        paths.append(path)
        section = page.split(f"`{path}`\n", 1)[1].split("\n#", 1)[0]
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            for name in param.opts:
                assert name in section, f"{path}: option {name} missing from the CLI reference"
            if param.help:
                shown = html.escape(_flat(param.help), quote=False).replace("|", "\\|")  # as a table cell shows it
                assert shown in _flat(section), f"{path} {param.opts[0]}: help text"
            row = next(line for line in section.splitlines() if line.startswith(f"| <code>{param.opts[0]}")
                       or line.startswith("| <code>-") and f", {param.opts[0]}" in line.split("|")[1])
            default = param.default
            unset = default is None or type(default).__name__ == "Sentinel"  # click 8.2+: UNSET
            if not unset and default not in (False, (), "") and not callable(default) and not param.is_flag:
                assert f"[default: " in row, f"{path} {param.opts[0]}: default {default!r} not shown"
    assert {"neuron-check ops", "neuron-check port", "neuron-check claims export",
            "neuron-check profile export"} <= set(paths)
    assert len(re.findall(r"^#+ `neuron-check", page, re.M)) == len(paths) + 1  # + the group itself


@pytest.mark.parametrize("command", ["ops", "port", "dist", "gate"])
def test_cli_reference_lists_what_help_prints(command):
    """Every option `--help` prints is on the page, under that command."""
    shown = CliRunner().invoke(main, [command, "--help"], standalone_mode=False).output
    page = cli_reference_markdown().split(f"`neuron-check {command}`\n", 1)[1].split("\n#", 1)[0]
    options = set(re.findall(r"^\s+(?:-\w, )?(--[\w-]+)", shown, re.M))
    assert options and all(f"<code>{o}" in page or f", {o}" in page for o in options), options


def test_rule_page_is_the_rule_table():
    page = rules_page_markdown()
    for rule in RULES:
        row = next(line for line in page.splitlines() if line.startswith(f"| {rule.id} |"))
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert cells[1:5] == [rule.family, rule.severity, rule.effort, "yes" if rule.fixable else "no"], row


def test_rule_table_says_what_the_fixes_do(monkeypatch):
    """A rule the table marks auto-fixable yields a fixable finding somewhere in the fixtures,
    and a rule it marks not fixable (NC105 among them) never does. The integer-device rules of an
    older torch (NC104, NC106) fire where the scan states torch 2.4's semantics."""
    from porting_cli.analysis.scan import torch_semantics

    fixable_seen: dict[str, set[bool]] = {}
    older = FIXTURES / "integer_devices_torch24.py"
    for path in [*sorted(FIXTURES.rglob("*.py")), ROOT / "examples" / "porting_idioms.py", older]:
        with monkeypatch.context() as patch:
            if path == older:
                patch.setattr(torch_semantics, "installed", lambda: torch_semantics.TorchSemantics((2, 4)))
            for finding in scan_file(str(path)).findings:
                fixable_seen.setdefault(finding.rule_id, set()).add(finding.fixable)
    assert fixable_seen["NC105"] == {False}
    for rule in RULES:
        if rule.id == "NC706" and rule.id not in fixable_seen:
            continue  # it needs an installed package with CUDA evidence: test_scan_recall.py installs one
        assert rule.id in fixable_seen, f"{rule.id}: no fixture triggers it"
        assert (True in fixable_seen[rule.id]) == rule.fixable, f"{rule.id}: table says fixable={rule.fixable}"


# An id cell "NC101–NC109, NC299" or a fix cell "NC201–208, NC212" / "yes" / "no".
_ID_RANGE = re.compile(r"NC(\d{3})(?:\s*[–-]\s*(?:NC)?(\d{3}))?")


def _ids(cell: str) -> set[str]:
    found = set()
    for first, last in _ID_RANGE.findall(cell):
        found |= {f"NC{n}" for n in range(int(first), int(last or first) + 1)}
    return found


def auto_fix_claims(markdown: str) -> list[tuple[str, bool]]:
    """(rule id, claimed auto-fixable) for every row of every Markdown table in `markdown` that
    has an id column and an auto-fix column."""
    claims = []
    header = None
    for line in markdown.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip().lower() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if set(line) <= set("|-: "):
            continue
        if "id" not in header or not any("fix" in h for h in header):
            continue
        ids = _ids(cells[header.index("id")].upper())
        fix_cell = cells[next(i for i, h in enumerate(header) if "fix" in h)]
        fixed = ids if fix_cell in ("yes", "all") else set() if fix_cell == "no" else _ids(fix_cell.upper())
        claims += [(rule_id, rule_id in fixed) for rule_id in sorted(ids)]
    return claims


def test_no_page_claims_a_fix_the_rule_table_does_not_have():
    by_id = {rule.id: rule for rule in RULES}
    wrong = [(page.name, rule_id, claimed)
             for page in doc_pages(ROOT) if page.exists()
             for rule_id, claimed in auto_fix_claims(page.read_text(encoding="utf-8"))
             if rule_id in by_id and by_id[rule_id].fixable != claimed]
    assert not wrong, f"pages disagree with porting_cli/analysis/scan/rules.py on auto-fix: {wrong}"


def test_the_old_readme_table_is_caught():
    """The README's hand-written table said NC101-108 were auto-fixed; NC105 is not."""
    row = "| id | family | effort | auto-fix | what |\n|---|---|---|---|---|\n| NC101–NC109 | device | none/low | NC101–108 | ... |\n"
    claims = dict(auto_fix_claims(row))
    assert claims["NC105"] is True and claims["NC109"] is False
    assert not next(r for r in RULES if r.id == "NC105").fixable


def test_status_page_is_the_status_set_and_the_rule():
    page = statuses_page_markdown()
    assert set(STATUS_MEANINGS) == set(Status)
    for status in Status:
        assert f"| `{status.value}` | {STATUS_MEANINGS[status]}" in page.replace("\\|", "|")
    for observed, status in (*OUTCOME_RULES, *ENGINE_RULES):
        assert f"| {observed} | `{status.value}` |" in page


def test_every_generated_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert set(reference_pages()) == set(PAGES)
    for path in PAGES:
        assert f": {path}" in nav, f"{path} is generated but not in mkdocs.yml's nav"
        assert not (ROOT / "docs" / path).exists(), f"docs/{path} is generated; a committed copy would drift"
