"""HTML rendering through jinja2 with autoescape on: every value from results is untrusted.

Pages are self-contained (inline CSS and JS, no network); the dashboard adds
plotly's JS as a local file beside its pages.
"""

from __future__ import annotations

import functools
from typing import Any

from op_db.records import STATUS_ORDER
from op_db.text import cut
from reports.model import Report
from reports.sanitize import for_html


@functools.lru_cache(maxsize=1)
def environment():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=True,  # results carry exception text, op names, user paths
        finalize=for_html,  # ...and control characters, lone surrogates: shown escaped, never raw
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(fmt_num=fmt_num, fmt_pct=fmt_pct)
    env.filters["cut"] = cut
    return env


def fmt_num(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def fmt_pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.1f}%"


def render_page(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def render_html(report: Report) -> str:
    return render_page("report.html.j2", report=report, statuses=[s.value for s in STATUS_ORDER])
