"""The sanitisers of reports/sanitize.py, and every renderer fed hostile text through them.

HOSTILE holds what a backend's exception, an op name or a script line may carry: an OSC 8
hyperlink, CSI sequences (clear screen, colour), markup, a NUL byte, a lone surrogate, a
one-byte C1 CSI, a bidi override, a table pipe and a newline.
"""

import json
import os
import re
import subprocess
import sys
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

from op_db.sample import result, sample_results
from reports.model import build_report
from reports.sanitize import (
    dumps_json, for_html, for_json, for_markdown, for_terminal, for_xml, markdown_fence, tolerant_streams,
)

OSC_LINK = "\x1b]8;;http://evil.example\x07click me\x1b]8;;\x07"
HOSTILE = (f"boom {OSC_LINK} \x1b[2J\x1b[31mred <script>alert(1)</script> nul\x00 lone\ud800 "
           "c1\x9b6n bidi\u202eevil | pipe\nsecond line\r\n")
RAW = ("\x1b", "\x00", "\x07", "\x9b", "\u202e", "\ud800")
PLAIN_TEXT_FORMATS = ("table",)  # a terminal shows `<script>` as the characters it is

EVERY_CHARACTER = "".join(map(chr, range(0x110000)))
BIDI_CONTROLS = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def inert(text: str, markup: bool = True) -> bool:
    """No raw control character or lone surrogate; with `markup`, no raw <script> either."""
    return not any(raw in text for raw in RAW) and not (markup and "<script>alert" in text)


# -- terminal ------------------------------------------------------------------


def test_terminal_shows_escapes_as_visible_text():
    shown = for_terminal(HOSTILE)
    assert inert(shown, markup=False)
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
def test_terminal_is_idempotent(one_line):
    once = for_terminal(HOSTILE, one_line=one_line)
    assert for_terminal(once, one_line=one_line) == once


def test_a_surrogate_pair_is_joined_not_replaced():
    assert for_terminal("\ud83d\ude00 \udfff") == "\U0001f600 \ufffd"


def test_plain_text_passes_unchanged():
    text = "aten.index_put_.default: expected [2, 3] * (4) at C:\\work\\x.py, café ✓"
    assert for_terminal(text) == text and for_xml(text) == text


# -- Markdown ------------------------------------------------------------------


def test_markdown_cell_is_one_line_without_markup_or_bare_pipes():
    cell = for_markdown(HOSTILE)
    assert inert(cell) and "\n" not in cell
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in cell
    assert re.search(r"(?<!\\)\|", cell) is None  # every pipe escaped: it cannot end the cell
    assert "pipe<br>second line" in cell


def _markdown_to_html(text: str) -> str:
    markdown_it = pytest.importorskip("markdown_it")
    # Raw HTML on, as GitHub's renderer allows it before its own sanitising: the test is stricter.
    return markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(text)


def test_markdown_table_renders_the_hostile_text_as_text_in_one_cell():
    row = f"| item | {for_markdown(HOSTILE)} | last |"
    html = _markdown_to_html(f"| a | b | c |\n|---|---|---|\n{row}\n")
    assert "<script" not in html and "\x1b" not in html
    assert html.count("<td>") == 3  # neither the pipe nor the newline split the cell
    assert "<td>last</td>" in html


def test_markdown_fence_cannot_be_closed_from_inside():
    code = "x = 1\n```\n<script>alert(1)</script>\n````\n"
    block = markdown_fence(code, "diff")
    html = _markdown_to_html(f"{block}\nafter")
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


def test_json_keeps_the_data_and_drops_only_lone_surrogates():
    data = {"message": HOSTILE, "list": [HOSTILE, 1, None], "k\ud800": True}
    text = dumps_json(data)
    assert text.isascii() and inert(text) and "&" not in text
    back = json.loads(text)
    assert back == for_json(data)
    assert back["message"] == HOSTILE.replace("\ud800", "\ufffd")  # ESC, NUL, markup: all kept as data
    text.encode("utf-8")  # and a strict UTF-8 writer can write it


# -- HTML ----------------------------------------------------------------------


def test_html_finalize_escapes_strings_and_passes_markup():
    from markupsafe import Markup

    assert for_html(HOSTILE) == for_terminal(HOSTILE)
    assert for_html(Markup("<b>ok</b>")) == Markup("<b>ok</b>")
    assert for_html(3) == 3


# -- every renderer of a report, fed the hostile text --------------------------


@pytest.fixture
def hostile_report():
    bad = result(f"op{OSC_LINK}", "float32", "ERROR", message=HOSTILE, first_failure=HOSTILE,
                 failing_op="aten.x\x1b[2J.default", fallback_ops=["aten.f\x00.default"])
    run = {"id": 7, "backend": "sim", "device": "sim\x1b[2J", "simulated": True, "started": "2026-01-01",
           "torch_version": "2.13\ud800"}
    return build_report(run, [*sample_results(), bad], [])


@pytest.mark.parametrize("fmt", ["table", "md", "html", "json", "junit"])
def test_every_report_format_is_inert_and_parses(hostile_report, fmt):
    from reports.export import render

    data = render(hostile_report, fmt)
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    text.encode("utf-8")  # no lone surrogate left to crash a writer
    assert inert(text, markup=fmt not in PLAIN_TEXT_FORMATS), fmt
    if fmt == "json":
        assert json.loads(text)["results"][-1]["message"] == HOSTILE.replace("\ud800", "\ufffd")
    elif fmt == "junit":
        failure = ET.fromstring(data).find(".//testcase[@classname='opinfo.op\\x1b]8;;http://evil.example"
                                           "\\x07click me\\x1b]8;;\\x07']/failure")
        assert failure is not None and "\\x1b[2J" in failure.text
    elif fmt == "md":
        assert "<script" not in _markdown_to_html(text)
    else:
        assert "\\x1b[2J" in text  # the text is shown, escaped, not dropped


def test_parquet_keeps_the_raw_text(hostile_report, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    from reports.render.parquet import write_parquet

    path = tmp_path / "r.parquet"
    write_parquet(hostile_report, str(path))
    messages = pq.read_table(path).column("message").to_pylist()
    assert HOSTILE.replace("\ud800", "\ufffd") in messages


def test_gate_text_is_inert(hostile_report):
    from reports.gate import evaluate, render_outcome

    baseline = build_report(hostile_report.run, [
        result(r.subject, r.dtype, "PASS") for r in hostile_report.results], [])
    text = render_outcome(evaluate(hostile_report, baseline))
    assert inert(text, markup=False) and "\\x1b]8;;http://evil.example" in text
    assert "regressions: " in text and "gate: FAILED" in text


@pytest.mark.parametrize("fmt", ["table", "md", "html", "json", "sarif"])
def test_every_porting_format_is_inert(fmt):
    from porting_cli.port import build_report as build_porting_report
    from porting_cli.scan import scan_source
    from porting_cli.trace import OpUse, TraceResult
    from reports.render.porting import render

    source = f"import torch\nx = torch.ones(2).cuda()  # {OSC_LINK} \x1b[2J <script>alert(1)</script>\n"
    error = {"op": "aten.mul.Tensor", "dtypes": ["float32"], "site": "s.py:2", "status": "ERROR", "message": HOSTILE}
    trace = TraceResult(script="s.py", device="sim", backend="sim", simulated=True, outcome="raised",
                        uses=[OpUse("aten.mul.Tensor", ("float32",), "s.py:2", 1)], errors=[error], fallbacks={},
                        exception={"type": "RuntimeError", "message": HOSTILE, "site": "s.py:2",
                                   "user_traceback": [f"s.py:2 in <module>: {HOSTILE}"]})
    patch = f"--- a/s.py\n+++ b/s.py\n-x = torch.ones(2).cuda()  # {OSC_LINK}\n"
    report = build_porting_report("s\x1b[2J.py", scan_source(source, "s.py"), patch, trace).to_dict()
    text = render(report, fmt)
    text.encode("utf-8")
    assert inert(text, markup=fmt not in PLAIN_TEXT_FORMATS), fmt
    if fmt in ("json", "sarif"):
        json.loads(text)
    if fmt == "md":
        assert "<script" not in _markdown_to_html(text)


def test_tolerant_streams_print_what_the_encoding_lacks_as_escapes():
    import io

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    tolerant_streams(stream)
    stream.write("café \ufffd ✓\n")
    stream.flush()
    assert raw.getvalue() == b"caf\\xe9 \\ufffd \\u2713\n"


# -- the command line end to end: a sim `raise` fault carries the hostile text --------------

REPO = Path(__file__).resolve().parents[2]


def cli(*args, **env_extra) -> subprocess.CompletedProcess:
    """neuron-check in a fresh process (real stdout bytes), with no NEURON_CHECK_* from outside."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_CHECK_")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "porting_cli", *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, timeout=300)


def shown(proc: subprocess.CompletedProcess) -> str:
    return (proc.stdout + proc.stderr).decode("utf-8", "surrogateescape")


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """One `ops` run on sim whose only item raises HOSTILE; its database and JUnit file."""
    folder = tmp_path_factory.mktemp("hostile")
    profile = folder / "hostile.json"
    profile.write_text(json.dumps({"name": "hostile", "faults": [
        {"op": "aten.mul.Tensor", "kind": "raise", "value": HOSTILE}]}), encoding="ascii")
    db, junit = folder / "h.db", folder / "ops.xml"
    proc = cli("ops", "--device", "sim", "--sim-profile", profile, "--ops", "mul", "--dtype", "fp32",
               "--max-samples", "1", "--db", db, "--junit", junit)
    assert proc.returncode == 0, shown(proc)
    return SimpleNamespace(folder=folder, profile=profile, db=db, junit=junit, proc=proc)


@pytest.mark.slow
def test_ops_prints_inert_text_and_writes_valid_junit(hostile_run):
    assert inert(shown(hostile_run.proc)) and "ERROR" in shown(hostile_run.proc)
    failure = ET.parse(hostile_run.junit).find(".//failure")
    assert failure.get("type") == "ERROR" and "\\x1b]8;;http://evil.example" in failure.get("message")


@pytest.mark.slow
def test_the_store_keeps_the_raw_text(hostile_run):
    from op_db.store import open_for_reading

    with open_for_reading(hostile_run.db) as store:
        (stored,) = store.results(store.resolve_run("latest"))
    assert stored.status.value == "ERROR"
    assert OSC_LINK in stored.message and "nul\x00" in stored.message  # raw: sanitised at output only
    assert "lone\ufffd" in stored.message  # UTF-8 cannot hold a lone surrogate; it did not crash the run


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["table", "md", "html", "json", "junit", "parquet"])
def test_report_formats_are_inert_and_parse(hostile_run, fmt):
    out = hostile_run.folder / f"report.{fmt}"
    args = ["report", "--db", hostile_run.db, "--format", fmt] + (["-o", out] if fmt != "table" else [])
    proc = cli(*args)
    assert proc.returncode == 0, shown(proc)
    if fmt == "parquet":
        pq = pytest.importorskip("pyarrow.parquet")
        assert OSC_LINK in pq.read_table(out).column("message")[0].as_py()  # Parquet is data: raw
        return
    text = proc.stdout.decode("utf-8") if fmt == "table" else out.read_text(encoding="utf-8")
    assert inert(text, markup=fmt not in PLAIN_TEXT_FORMATS) and inert(shown(proc), markup=False)
    if fmt == "json":
        assert OSC_LINK in json.loads(text)["results"][0]["message"]
    elif fmt == "junit":
        assert ET.parse(out).find(".//failure").get("type") == "ERROR"
    elif fmt == "md":
        assert "\\x1b]8;;http://evil.example" in _markdown_to_html(text)  # rendered, it reads as the escape
    else:
        assert "\\x1b]8;;http://evil.example" in text  # shown, escaped


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_gate_output_is_inert(hostile_run, fmt):
    baseline = json.loads(cli("report", "--db", hostile_run.db, "--format", "json").stdout)
    for row in baseline["results"]:
        row.update(status="PASS", message=None)
    path = hostile_run.folder / "baseline.json"
    path.write_text(json.dumps(baseline), encoding="utf-8")
    proc = cli("gate", "--db", hostile_run.db, "--baseline", path, "--format", fmt)
    assert proc.returncode == 1, shown(proc)  # the regression trips the gate
    text = proc.stdout.decode("utf-8")
    assert inert(text, markup=fmt == "json")
    if fmt == "json":
        assert OSC_LINK in json.loads(text)["regressions"][0]["message"]
    else:
        assert "\\x1b]8;;http://evil.example" in text


@pytest.mark.slow
def test_dashboard_pages_are_inert(hostile_run):
    pytest.importorskip("plotly")
    site = hostile_run.folder / "site"
    proc = cli("dashboard", "--db", hostile_run.db, "-o", site)
    assert proc.returncode == 0, shown(proc)
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 3  # index, the run's report, the op's history
    texts = [page.read_text(encoding="utf-8") for page in pages]
    assert all(inert(text) for text in texts)
    assert any("\\x1b]8;;http://evil.example" in text for text in texts)


HOSTILE_SCRIPT = ("import torch\n"
                  "x = torch.ones(3).cuda()  # caf\u00e9 \x1b[2J <script>alert(1)</script>\n"
                  "y = x * 2  # the profile makes aten.mul.Tensor raise the hostile text\n")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["table", "md", "sarif"])
def test_porting_report_of_a_script_that_raises_hostile_text_is_inert(hostile_run, fmt):
    script = hostile_run.folder / "hostile_train.py"
    script.write_text(HOSTILE_SCRIPT, encoding="utf-8")
    out = hostile_run.folder / f"port.{fmt}"
    proc = cli(script, "--device", "sim", "--sim-profile", hostile_run.profile, "--format", fmt,
               *(["-o", out] if fmt != "table" else []))
    assert proc.returncode == 0, shown(proc)
    text = proc.stdout.decode("utf-8") if fmt == "table" else out.read_text(encoding="utf-8")
    # The patch quotes the script's source verbatim, in a fence: in Markdown it is code, not markup.
    assert inert(text, markup=fmt not in (*PLAIN_TEXT_FORMATS, "md")) and inert(shown(proc), markup=False)
    assert "aten.mul.Tensor" in text
    if fmt == "sarif":
        assert any(OSC_LINK in r["message"]["text"] for r in json.loads(text)["runs"][0]["results"])
    elif fmt == "md":
        html = _markdown_to_html(text)
        assert "\\x1b]8;;http://evil.example" in html and "<script" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the source line, shown as code
    else:
        assert "\\x1b]8;;http://evil.example" in text


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["report", "--format", "table"],
    ["report", "--format", "md"],
    ["gate", "--write-expected", "{folder}/xfail.yaml", "--expected-failures", "{folder}/none.yaml"],
])
def test_a_stdout_that_cannot_encode_unicode_never_crashes(hostile_run, command):
    (hostile_run.folder / "none.yaml").write_text("schema: 1\nexpected_failures: []\n")
    args = [a.format(folder=hostile_run.folder) for a in command]
    proc = cli(*args, "--db", hostile_run.db, PYTHONIOENCODING="ascii")
    assert proc.returncode in (0, 1) and b"Traceback" not in proc.stderr, shown(proc)
    assert inert(shown(proc), markup=False) and b"x1b" in proc.stdout + proc.stderr


def test_a_porting_table_on_an_ascii_stdout_never_crashes(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(HOSTILE_SCRIPT, encoding="utf-8")
    proc = cli(script, "--static-only", PYTHONIOENCODING="ascii")
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, shown(proc)
    assert b"NC101" in proc.stdout and b"\x1b" not in proc.stdout


@pytest.fixture
def not_a_folder(tmp_path):
    """A regular file: nothing can be written beneath it, whoever runs the tests (root included)."""
    path = tmp_path / "plain-file"
    path.write_text("")
    return path


@pytest.mark.parametrize("command", [
    ["ops", "--device", "sim", "--ops", "mul", "--dtype", "fp32", "--db", "{tmp}/new.db", "--junit", "{bad}/ops.xml"],
    ["models", "--device", "sim", "--arch", "gpt2", "--db", "{tmp}/new.db", "--junit", "{bad}/models.xml"],
    ["dashboard", "--db", "{db}", "-o", "{bad}/site"],
    ["report", "--db", "{db}", "--format", "html", "-o", "{bad}/r.html"],
    ["report", "--db", "{db}", "--format", "junit", "-o", "{bad}/r.xml"],
])
def test_an_unwritable_output_is_one_sentence_and_exit_2(tmp_path, not_a_folder, sample_db, command):
    args = [a.format(tmp=tmp_path, bad=not_a_folder, db=sample_db) for a in command]
    proc = cli(*args)
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2, shown(proc)
    assert len(lines) == 1 and "Traceback" not in shown(proc) and "cannot write" in lines[0]
    assert str(not_a_folder) in lines[0] or str(tmp_path) in lines[0]
    assert not (tmp_path / "new.db").exists()  # refused before anything ran or was stored


RAW_SOURCE = b"import torch\nx = torch.ones(2).cuda()  # \x1b[2J kept\r\n"


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_diff_into_a_pipe_is_the_exact_patch_and_escaped_on_a_terminal(tmp_path):
    import pty

    script = tmp_path / "train.py"
    script.write_bytes(RAW_SOURCE)
    piped = cli(script, "--diff")
    assert piped.returncode == 0, shown(piped)
    assert b"\x1b[2J kept\r\n" in piped.stdout  # byte for byte, so `| git apply` works
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_CHECK_")}
    proc = subprocess.Popen([sys.executable, "-m", "porting_cli", str(script), "--diff"], cwd=REPO, env=env,
                            stdout=follower, stderr=subprocess.PIPE)
    os.close(follower)
    on_terminal = _read_all(leader)
    os.close(leader)
    assert proc.wait(timeout=120) == 0
    assert b"\x1b" not in on_terminal and b"\\x1b[2J kept" in on_terminal
