"""Plain-text renderers of a Report: a terminal table and Markdown.

Both show the same sections in the same order; only the tabulate format and
the heading style differ.
"""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from op_db.records import FAILING, Status
from op_db.text import cut
from reports.claims import text_rows as claims_text_rows
from reports.model import Matrix, Report
from reports.sanitize import for_markdown, for_terminal

LIST_LIMIT = 30  # rows per list section; the JSON/HTML/Parquet exports hold everything


def render_table(report: Report) -> str:
    return _render(report, tablefmt="simple", heading=lambda text: f"\n== {text} ==")


def render_markdown(report: Report) -> str:
    return _render(report, tablefmt="github", heading=lambda text: f"\n## {text}\n")


def _render(report: Report, tablefmt: str, heading) -> str:
    md = tablefmt == "github"
    out: list[str] = []
    title = f"neuron-check coverage: {_cell(report.title, md)}"
    out.append(f"# {title}\n" if md else title)
    if report.simulated:
        out.append(
            "SIMULATED RUN: these results come from the `sim` stand-in device, not real hardware."
        )
    out.append(_cell(_run_line(report.run), md))

    def table(rows: list[list[Any]], headers: list[str]) -> None:
        if not rows:
            out.append("(none)")
            return
        rows = [[_cell(c, md) for c in row] for row in rows]
        out.append(tabulate(rows, headers=[_cell(h, md) for h in headers], tablefmt=tablefmt, disable_numparse=True))

    out.append(heading("Counts per status"))
    table([[s, n] for s, n in report.summary.items() if n], ["status", "items"])

    out.append(heading("Pass rate per suite and dtype"))
    table(
        [[r["suite"], r["dtype"], r["items"], r["working"], r["failing"], _percent(r["pass_rate"])]
         for r in report.pass_rates],
        ["suite", "dtype", "items", "working", "failing", "pass rate"],
    )

    if report.models:
        out.append(heading("Models x dtype"))
        _matrix(report.models, table)
    if report.fp8:
        out.append(heading("FP8 readiness (check x fp8 dtype)"))
        _matrix(report.fp8, table)

    if report.families:
        out.append(heading("Model families (classes run, passed, blocked, top blocking ops)"))
        table([[f["family"], f["classes"], f["passed"], f["blocked"],
                _cut(", ".join(f"{o['op']} ({o['classes']})" for o in f["top_blocking_ops"]) or "-")]
               for f in report.families], ["family", "classes run", "passed", "blocked", "top blocking ops"])

    zoo = any("zoo_models" in b for b in report.blockers)
    out.append(heading("Aten overloads that block the most models" if zoo else
                       "Aten overloads that block the most items"))
    table(
        [[b["op"]] + ([b["zoo_models"]] if zoo else []) + [b["subjects"], b["items"], _counts(b["statuses"]),
                                                            _cut(", ".join(b["blocks"]))]
         for b in report.blockers[:LIST_LIMIT]],
        ["aten overload"] + (["zoo models using it"] if zoo else []) + ["subjects", "items", "statuses", "blocks"],
    )
    _more(out, report.blockers)

    if report.graph_breaks:
        out.append(heading("Graph-break reasons that affect the most subjects (compile mode)"))
        table(
            [[_cut(b["reason"], 120), b["subjects"], b["items"], _cut(", ".join(b["breaks"]))]
             for b in report.graph_breaks[:LIST_LIMIT]],
            ["graph-break reason", "subjects", "items", "breaks"],
        )
        _more(out, report.graph_breaks)

    out.append(heading("Dtype-claim discrepancies"))
    for label, key in (("works but unclaimed", "works_but_unclaimed"), ("claimed but fails", "claimed_but_fails")):
        rows = report.claims[key]
        out.append(f"{label}: {len(rows)}")
        if rows:
            table(
                [[r["suite"], r["subject"], r["variant"], r["dtype"], r["mode"], r["status"]] for r in rows[:LIST_LIMIT]],
                ["suite", "subject", "variant", "dtype", "mode", "status"],
            )
            _more(out, rows)

    vendor = claims_text_rows(report)
    if vendor is not None:
        out.append(heading(f"Vendor claims vs measured ({_cell(report.claims['source'], md)})"))
        table(*vendor)

    out.append(heading("CPU fallbacks"))
    table(
        [[f["op"], f["items"], _cut(", ".join(f["subjects"]))] for f in report.fallbacks[:LIST_LIMIT]],
        ["aten overload", "items", "subjects"],
    )
    _more(out, report.fallbacks)

    failures = [r for r in report.results if r.status in FAILING]
    out.append(heading(f"Failures ({len(failures)})"))
    # A model's MISMATCH says where it was born (models/first_divergence.py): its own column,
    # shown when any failure has one, so an op sweep's table keeps its width.
    located = any(r.divergence for r in failures)
    table(
        [[r.item.test_id, r.status.value, r.failing_op or "", *([r.divergence or ""] if located else []),
          _cut(r.message or "", 100)] for r in failures[:LIST_LIMIT]],
        ["item", "status", "failing op", *(["first divergent module"] if located else []), "message"],
    )
    _more(out, failures)

    # Passing results with a caveat (numerics rule 6: less accurate than the CPU kernel through a
    # composite implementation, the CPU overflowed, no CPU kernel in the dtype, a surrogate loss).
    noted = [r for r in report.results if r.status in (Status.PASS, Status.FALLBACK) and r.message]
    if noted:
        out.append(heading(f"Passed with a note ({len(noted)})"))
        table([[r.item.test_id, r.status.value, _cut(r.message, 140)] for r in noted[:LIST_LIMIT]],
              ["item", "status", "note"])
        _more(out, noted)

    if report.rounding:
        out.append(heading("Rounding (op x dtype: how the device rounds into the dtype)"))
        _matrix(report.rounding, table)

    # The full matrix is long (an op sweep has ~700 rows): after the lists a reader acts on.
    out.append(heading("Coverage matrix (op x dtype, per variant and mode)"))
    _matrix(report.matrix, table)

    if report.coverage:
        out.append(heading("Dispatcher registrations"))
        table(sorted(report.coverage.items()), ["kind", "ops"])
    # Every piece of untrusted text was sanitised above (cells before tabulate, so columns align);
    # this idempotent pass keeps the page inert should a section forget.
    return for_terminal("\n".join(out) + "\n")


def _matrix(matrix: Matrix, table) -> None:
    table(
        [[r["suite"], r["subject"], r["variant"], r["mode"], *(r["cells"].get(d, "") for d in matrix.dtypes)]
         for r in matrix.rows],
        ["suite", "subject", "variant", "mode", *matrix.dtypes],
    )


def _run_line(run: dict[str, Any]) -> str:
    parts = [f"{k} {run[k]}" for k in ("started", "torch_version", "backend_version", "transformers_version",
                                        "git_revision") if run.get(k)]
    return "; ".join(parts)


def _cell(value: Any, md: bool) -> Any:
    """Untrusted text as one inert line: no escapes for the terminal, no markup or bare `|` in Markdown."""
    if not isinstance(value, str):
        return value
    value = for_terminal(value, one_line=True)
    return for_markdown(value) if md else value


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.1f}%"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def _cut(text: str, limit: int = 80) -> str:
    return cut(text, limit)


def _more(out: list[str], rows: list) -> None:
    if len(rows) > LIST_LIMIT:
        out.append(f"... and {len(rows) - LIST_LIMIT} more (see --format json or html).")
