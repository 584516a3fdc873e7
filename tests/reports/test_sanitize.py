"""The sanitisers of reports/sanitize.py, and every renderer fed hostile text through them
(the `hostile_text` fixture of conftest.py)."""

import json
import re
import unicodedata
import xml.etree.ElementTree as ET

import pytest

from op_db.sample import result, sample_results
from reports.model import build_report
from reports.sanitize import (
    dumps_json, for_html, for_json, for_markdown, for_terminal, for_xml, markdown_fence, tolerant_streams,
)

EVERY_CHARACTER = "".join(map(chr, range(0x110000)))
BIDI_CONTROLS = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


# -- terminal ------------------------------------------------------------------


def test_terminal_shows_escapes_as_visible_text(hostile_text):
    shown = for_terminal(hostile_text.text)
    assert hostile_text.inert(shown, markup=False)
    assert "\\x1b]8;;http://evil.example\\x07click me" in shown  # visible, not followed
    assert "\\x1b[2J" in shown and "nul\\x00" in shown and "c1\\x9b6n" in shown and "bidi\\u202eevil" in shown
    assert "lone\ufffd" in shown
    assert "pipe\nsecond line\n" in shown  # lines stay lines; CRLF is a newline


def test_terminal_leaves_no_control_character_of_any_code_point():
    shown = for_terminal(EVERY_CHARACTER)
    left = {ch for ch in shown if unicodedata.category(ch) in ("Cc", "Cs") or ch in BIDI_CONTROLS}
    assert left == {"\t", "\n"}
    one_line = for_terminal(EVERY_CHARACTER, one_line=True)
    assert not {ch for ch in one_line if unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")}


@pytest.mark.parametrize("one_line", [False, True])
def test_terminal_is_idempotent(one_line, hostile_text):
    once = for_terminal(hostile_text.text, one_line=one_line)
    assert for_terminal(once, one_line=one_line) == once


def test_a_surrogate_pair_is_joined_not_replaced():
    assert for_terminal("\ud83d\ude00 \udfff") == "\U0001f600 \ufffd"


def test_plain_text_passes_unchanged():
    text = "aten.index_put_.default: expected [2, 3] * (4) at C:\\work\\x.py, café ✓"
    assert for_terminal(text) == text and for_xml(text) == text


# -- Markdown ------------------------------------------------------------------


def test_markdown_cell_is_one_line_without_markup_or_bare_pipes(hostile_text):
    cell = for_markdown(hostile_text.text)
    assert hostile_text.inert(cell) and "\n" not in cell
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in cell
    assert re.search(r"(?<!\\)\|", cell) is None  # every pipe escaped: it cannot end the cell
    assert "pipe<br>second line" in cell


def test_markdown_table_renders_the_hostile_text_as_text_in_one_cell(hostile_text, markdown_html):
    row = f"| item | {for_markdown(hostile_text.text)} | last |"
    html = markdown_html(f"| a | b | c |\n|---|---|---|\n{row}\n")
    assert "<script" not in html and "\x1b" not in html
    assert html.count("<td>") == 3  # neither the pipe nor the newline split the cell
    assert "<td>last</td>" in html


def test_markdown_fence_cannot_be_closed_from_inside(markdown_html):
    code = "x = 1\n```\n<script>alert(1)</script>\n````\n"
    block = markdown_fence(code, "diff")
    html = markdown_html(f"{block}\nafter")
    assert html.count("<pre>") == 1 and "<script" not in html
    assert "&lt;script&gt;" in html and "<p>after</p>" in html


# -- XML -----------------------------------------------------------------------


def test_xml_accepts_every_code_point_in_text_and_attributes():
    safe = for_xml(EVERY_CHARACTER)
    node = ET.Element("failure", message=safe)
    node.text = safe
    parsed = ET.fromstring(ET.tostring(node, encoding="utf-8"))  # raises on any character XML 1.0 forbids
    assert parsed.text == safe and parsed.get("message") == safe


# -- JSON ----------------------------------------------------------------------


def test_json_keeps_the_data_and_drops_only_lone_surrogates(hostile_text):
    data = {"message": hostile_text.text, "list": [hostile_text.text, 1, None], "k\ud800": True}
    text = dumps_json(data)
    assert text.isascii() and hostile_text.inert(text) and "&" not in text
    back = json.loads(text)
    assert back == for_json(data)
    assert back["message"] == hostile_text.stored  # ESC, NUL, markup: all kept as data
    text.encode("utf-8")  # and a strict UTF-8 writer can write it


# -- HTML ----------------------------------------------------------------------


def test_html_finalize_escapes_strings_and_passes_markup(hostile_text):
    from markupsafe import Markup

    assert for_html(hostile_text.text) == for_terminal(hostile_text.text)
    assert for_html(Markup("<b>ok</b>")) == Markup("<b>ok</b>")
    assert for_html(3) == 3


# -- every renderer of a report, fed the hostile text --------------------------


@pytest.fixture
def hostile_report(hostile_text):
    text = hostile_text.text
    bad = result(f"op{hostile_text.osc_link}", "float32", "ERROR", message=text, first_failure=text,
                 failing_op="aten.x\x1b[2J.default", fallback_ops=["aten.f\x00.default"])
    run = {"id": 7, "backend": "sim", "device": "sim\x1b[2J", "simulated": True, "started": "2026-01-01",
           "torch_version": "2.13\ud800"}
    return build_report(run, [*sample_results(), bad], [])


@pytest.mark.parametrize("fmt", ["table", "md", "html", "json", "junit"])
def test_every_report_format_is_inert_and_parses(hostile_report, fmt, hostile_text, markdown_html):
    from reports.export import render

    data = render(hostile_report, fmt)
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    text.encode("utf-8")  # no lone surrogate left to crash a writer
    assert hostile_text.inert(text, markup=fmt not in hostile_text.plain_text_formats), fmt
    if fmt == "json":
        assert json.loads(text)["results"][-1]["message"] == hostile_text.stored
    elif fmt == "junit":
        failure = ET.fromstring(data).find(".//testcase[@classname='opinfo.op\\x1b]8;;http://evil.example"
                                           "\\x07click me\\x1b]8;;\\x07']/failure")
        assert failure is not None and "\\x1b[2J" in failure.text
    elif fmt == "md":
        assert "<script" not in markdown_html(text)
    else:
        assert "\\x1b[2J" in text  # the text is shown, escaped, not dropped


def test_parquet_keeps_the_raw_text(hostile_report, tmp_path, hostile_text):
    pq = pytest.importorskip("pyarrow.parquet")
    from reports.render.parquet import write_parquet

    path = tmp_path / "r.parquet"
    write_parquet(hostile_report, str(path))
    messages = pq.read_table(path).column("message").to_pylist()
    assert hostile_text.stored in messages


def test_gate_text_is_inert(hostile_report, hostile_text):
    from reports.gate import evaluate, render_outcome

    baseline = build_report(hostile_report.run, [
        result(r.subject, r.dtype, "PASS") for r in hostile_report.results], [])
    text = render_outcome(evaluate(hostile_report, baseline))
    assert hostile_text.inert(text, markup=False) and "\\x1b]8;;http://evil.example" in text
    assert "regressions: " in text and "gate: FAILED" in text


@pytest.mark.parametrize("fmt", ["table", "md", "html", "json", "sarif"])
def test_every_porting_format_is_inert(fmt, hostile_text, markdown_html):
    from porting_cli.cli.port_report import build_report as build_porting_report
    from porting_cli.analysis.scan import scan_source
    from porting_cli.runtime.trace import OpUse, TraceResult
    from reports.render.porting import render

    source = f"import torch\nx = torch.ones(2).cuda()  # {hostile_text.osc_link} \x1b[2J <script>alert(1)</script>\n"
    error = {"op": "aten.mul.Tensor", "dtypes": ["float32"], "site": "s.py:2", "status": "ERROR",
             "message": hostile_text.text}
    trace = TraceResult(script="s.py", device="sim", backend="sim", simulated=True, outcome="raised",
                        uses=[OpUse("aten.mul.Tensor", ("float32",), "s.py:2", 1)], errors=[error], fallbacks={},
                        exception={"type": "RuntimeError", "message": hostile_text.text, "site": "s.py:2",
                                   "user_traceback": [f"s.py:2 in <module>: {hostile_text.text}"]})
    patch = f"--- a/s.py\n+++ b/s.py\n-x = torch.ones(2).cuda()  # {hostile_text.osc_link}\n"
    report = build_porting_report("s\x1b[2J.py", scan_source(source, "s.py"), patch, trace).to_dict()
    text = render(report, fmt)
    text.encode("utf-8")
    assert hostile_text.inert(text, markup=fmt not in hostile_text.plain_text_formats), fmt
    if fmt in ("json", "sarif"):
        json.loads(text)
    if fmt == "md":
        assert "<script" not in markdown_html(text)


def test_tolerant_streams_print_what_the_encoding_lacks_as_escapes():
    import io

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    tolerant_streams(stream)
    stream.write("café \ufffd ✓\n")
    stream.flush()
    assert raw.getvalue() == b"caf\\xe9 \\ufffd \\u2713\n"


def test_commands_print_only_through_the_sanitiser():
    """Every command prints with reports.sanitize.echo, so a new message cannot leak escapes."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "porting_cli" / "cli"
    raw_prints = []
    for path in [*sorted((package / "commands").glob("*.py")), package / "options.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
                if (owner, name) in (("click", "echo"), ("click", "secho"), ("", "print")):
                    raw_prints.append(f"{path.name}:{node.lineno}")
    assert raw_prints == []


def test_the_store_keeps_raw_text_and_survives_lone_surrogates(tmp_path, hostile_text):
    from op_db.sample import write_sample_run
    from op_db.store import Store

    bad = result("op", "float32", "ERROR", message=hostile_text.text + " \ud83d\ude00", first_failure="\udcff")
    with Store.open(tmp_path / "r.db") as store:
        run_id = write_sample_run(store, [bad])
        (stored,) = store.results(run_id)
    assert stored.message == hostile_text.stored + " \U0001f600"  # ESC, NUL, markup raw; a pair joined
    assert stored.first_failure == "\ufffd"
