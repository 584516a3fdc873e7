"""Renderers of the porting report (the dict of porting_cli.cli.port_report.PortReport.to_dict()).

`render(report, fmt)` for fmt in table | md | html | json | sarif. Text formats show the same
sections in the same order: verdict and why, effort, runtime, op table, findings, remapped
CUDA calls, divergence, patch. JSON holds everything; HTML escapes every value (jinja2
autoescape) because paths, source lines and exception text come from the user's script.
"""

from __future__ import annotations

from typing import Any, Callable

from op_db.text import cut, plural
from reports.sanitize import dumps_json, for_markdown, for_terminal, markdown_fence

LIST_LIMIT = 40  # rows per text section; JSON and HTML hold every row


def render(report: dict[str, Any], fmt: str) -> str:
    renderers: dict[str, Callable[[dict[str, Any]], str]] = {
        "table": render_table, "md": render_markdown, "html": render_html,
        "json": render_json, "sarif": _render_sarif,
    }
    return renderers[fmt](report)


def render_json(report: dict[str, Any]) -> str:
    return dumps_json(report, indent=2) + "\n"


def _render_sarif(report: dict[str, Any]) -> str:
    from reports.render.sarif import porting_sarif

    return dumps_json(porting_sarif(report), indent=2) + "\n"


def render_html(report: dict[str, Any]) -> str:
    from reports.render.html import render_page

    return render_page("porting.html.j2", report=report, op_limit=None)


def render_table(report: dict[str, Any]) -> str:
    return _render(report, md=False)


def render_markdown(report: dict[str, Any]) -> str:
    return _render(report, md=True)


def runtime_line(runtime: dict[str, Any] | None) -> str:
    if runtime is None:
        return "Runtime: not checked (--static-only)."
    device = runtime["device"] or "?"
    sim = " (SIMULATED: the sim stand-in device, not real hardware)" if runtime["simulated"] else ""
    steps = f", {runtime['steps']} optimizer step(s)" if runtime["steps"] else ""
    secs = f" in {runtime['seconds']:.1f} s" if runtime.get("seconds") is not None else ""
    return f"Runtime on {device}{sim}: {runtime['outcome_text']}{steps}{secs}."


def _render(report: dict[str, Any], md: bool) -> str:
    from tabulate import tabulate  # only the text formats need it: JSON starts faster without

    tablefmt = "github" if md else "simple"
    out: list[str] = []

    def heading(text: str) -> None:
        out.append(f"\n## {text}\n" if md else f"\n== {text} ==")

    def table(rows: list[list[Any]], headers: list[str]) -> None:
        if not rows:
            out.append("(none)")
            return
        shown = rows[:LIST_LIMIT]
        cells = [[_cell(c, md) for c in row] for row in shown]
        out.append(tabulate(cells, headers=headers, tablefmt=tablefmt, disable_numparse=True))
        if len(rows) > LIST_LIMIT:
            out.append(f"... and {len(rows) - LIST_LIMIT} more (see --format json or html)")

    verdict = report["verdict"].upper()
    script = _cell(report["script"], md)
    out.append(f"# neuron-check porting report: {script}\n" if md else f"neuron-check porting report: {script}")
    out.append(f"**Verdict: {verdict}**" if md else f"Verdict: {verdict}")
    out.extend(f"{'- ' if md else '  - '}{_cell(reason, md)}" for reason in report["reasons"])
    effort = report["effort"]
    out.append(f"\nEffort: {effort['overall']} ({plural(effort.get('items', 0), 'change item')} from "
               f"{effort['findings']} finding(s), {effort['fixable']} auto-fixable; "
               f"{effort['blocking_ops']} blocking op(s), {effort['fallback_ops']} CPU-fallback op(s); "
               f"{_hours(effort)} of work)")
    runtime = report["runtime"]
    out.append(_cell(runtime_line(runtime), md))
    if runtime is not None:
        exc = runtime.get("exception")
        if exc:
            out.append(f"Exception: {exc['type']}: {_cell(_short(exc['message'], 300), md)}"
                       + (f" at {exc['site']}" if exc.get("site") else ""))
            out.extend(f"    {_cell(line, md)}" for line in exc.get("user_traceback", []))
        if runtime.get("exit_code") not in (None, 0) or runtime.get("exit_message"):
            out.append(f"Exit code of the script: {runtime['exit_code']}"
                       + (f" ({_cell(runtime['exit_message'], md)})" if runtime.get("exit_message") else ""))
        out.extend(f"Note: {_cell(note, md)}" for note in runtime["notes"])
        if runtime["against"]:
            out.append(f"Predictions from {_cell(runtime['against'], md)}.")

    heading("Change items")
    blocked_by = set(report.get("blocked_by", ()))
    table([[i["id"] + (" (blocks)" if i["id"] in blocked_by else ""), i["effort"],
            f"{i['hours_low']:g}-{i['hours_high']:g} h", "yes" if i["fixable"] else "no", i["rationale"]]
           for i in report.get("items", [])],
          ["item", "effort", "hours", "fix", "why"])

    heading("Ops on the target")
    table([[r["op"], r["status"], r["count"], ", ".join(r["dtypes"]), ", ".join(r["sites"][:3]),
            r["predicted"] or "", _short(r["message"])] for r in report["ops"]] if runtime else [],
          ["op", "status", "count", "dtypes", "sites", "predicted", "message"])

    if len(report.get("files", [])) > 1:
        heading("Files")
        table([[f["path"], f["lines"], f["findings"], f["needs_change"], f["fixable"]] for f in report["files"]],
              ["file", "lines", "findings", "need a change", "auto-fixable"])
    out.extend(f"Warning: {_cell(w, md)}" for w in report.get("warnings", []))

    heading("Findings")
    table([[f"{f['path']}:{f['line']}:{f['col']}", f["rule"], f["severity"], f["effort"],
            "yes" if f["fixable"] else "no", f["message"]] for f in report["findings"]],
          ["where", "rule", "severity", "effort", "fix", "message"])

    if report["remapped"]:
        heading("CUDA calls remapped to the target")
        table([[r["site"] or "(library code)", r["what"], r["count"]] for r in report["remapped"]],
              ["site", "remapped", "count"])
    if runtime and runtime.get("divergence"):
        heading("CPU vs target outputs (get_model_and_inputs)")
        d = runtime["divergence"]
        line = f"{d['status']}" + (f": {_short(d['reason'], 300)}" if d.get("reason") else "")
        if d.get("module"):
            line += f"; first divergent module: {d['module']} ({d.get('module_class')})"
        out.append(_cell(line, md))
    if report["patch"]:
        heading("Patch (neuron-check --fix applies it; --diff prints it)")
        out.append(markdown_fence(report["patch"], "diff") if md else report["patch"].rstrip("\n"))
    # Untrusted pieces were sanitised one by one above (cells before tabulate, so columns align);
    # this idempotent pass keeps the page inert should a section forget (and covers the patch).
    return for_terminal("\n".join(out) + "\n")


def _hours(effort: dict[str, Any]) -> str:
    if "hours_low" in effort:
        return f"{effort['hours_low']:g}-{effort['hours_high']:g} h"
    return f"about {effort['hours']:g} h"


def _short(text: str | None, limit: int = 100) -> str:
    return cut(text, limit)


def _cell(value: Any, md: bool) -> str:
    """Untrusted text (paths, source lines, exception text) as one inert line for the format."""
    text = for_terminal(value, one_line=True)
    return for_markdown(text) if md else text
