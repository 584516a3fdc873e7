"""The command line end to end: a sim `raise` fault carries hostile text (conftest's `hostile_text`)
through `ops`, `report`, `gate`, `dashboard` and the porting check; unwritable outputs; an ASCII stdout."""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

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
def hostile_run(tmp_path_factory, hostile_text):
    """One `ops` run on sim whose only item raises hostile_text.text; its database and JUnit file."""
    folder = tmp_path_factory.mktemp("hostile")
    profile = folder / "hostile.json"
    profile.write_text(json.dumps({"name": "hostile", "faults": [
        {"op": "aten.mul.Tensor", "kind": "raise", "value": hostile_text.text}]}), encoding="ascii")
    db, junit = folder / "h.db", folder / "ops.xml"
    proc = cli("ops", "--device", "sim", "--sim-profile", profile, "--ops", "mul", "--dtype", "fp32",
               "--max-samples", "1", "--db", db, "--junit", junit)
    assert proc.returncode == 0, shown(proc)
    return SimpleNamespace(folder=folder, profile=profile, db=db, junit=junit, proc=proc)


@pytest.mark.slow
def test_ops_prints_inert_text_and_writes_valid_junit(hostile_run, hostile_text):
    assert hostile_text.inert(shown(hostile_run.proc)) and "ERROR" in shown(hostile_run.proc)
    failure = ET.parse(hostile_run.junit).find(".//failure")
    assert failure.get("type") == "ERROR" and "\\x1b]8;;http://evil.example" in failure.get("message")


@pytest.mark.slow
def test_the_store_keeps_the_raw_text(hostile_run, hostile_text):
    from op_db.store import open_for_reading

    with open_for_reading(hostile_run.db) as store:
        (stored,) = store.results(store.resolve_run("latest"))
    assert stored.status.value == "ERROR"
    assert hostile_text.osc_link in stored.message and "nul\x00" in stored.message  # raw: sanitised at output only
    assert "lone\ufffd" in stored.message  # UTF-8 cannot hold a lone surrogate; it did not crash the run


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["table", "md", "html", "json", "junit", "parquet"])
def test_report_formats_are_inert_and_parse(hostile_run, fmt, hostile_text, markdown_html):
    out = hostile_run.folder / f"report.{fmt}"
    args = ["report", "--db", hostile_run.db, "--format", fmt] + (["-o", out] if fmt != "table" else [])
    proc = cli(*args)
    assert proc.returncode == 0, shown(proc)
    if fmt == "parquet":
        pq = pytest.importorskip("pyarrow.parquet")
        assert hostile_text.osc_link in pq.read_table(out).column("message")[0].as_py()  # Parquet is data: raw
        return
    text = proc.stdout.decode("utf-8") if fmt == "table" else out.read_text(encoding="utf-8")
    assert hostile_text.inert(text, markup=fmt not in hostile_text.plain_text_formats)
    assert hostile_text.inert(shown(proc), markup=False)
    if fmt == "json":
        assert hostile_text.osc_link in json.loads(text)["results"][0]["message"]
    elif fmt == "junit":
        assert ET.parse(out).find(".//failure").get("type") == "ERROR"
    elif fmt == "md":
        assert "\\x1b]8;;http://evil.example" in markdown_html(text)  # rendered, it reads as the escape
    else:
        assert "\\x1b]8;;http://evil.example" in text  # shown, escaped


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_gate_output_is_inert(hostile_run, fmt, hostile_text):
    baseline = json.loads(cli("report", "--db", hostile_run.db, "--format", "json").stdout)
    for row in baseline["results"]:
        row.update(status="PASS", message=None)
    path = hostile_run.folder / "baseline.json"
    path.write_text(json.dumps(baseline), encoding="utf-8")
    proc = cli("gate", "--db", hostile_run.db, "--baseline", path, "--format", fmt)
    assert proc.returncode == 1, shown(proc)  # the regression trips the gate
    text = proc.stdout.decode("utf-8")
    assert hostile_text.inert(text, markup=fmt == "json")
    if fmt == "json":
        assert hostile_text.osc_link in json.loads(text)["regressions"][0]["message"]
    else:
        assert "\\x1b]8;;http://evil.example" in text


@pytest.mark.slow
def test_dashboard_pages_are_inert(hostile_run, hostile_text):
    pytest.importorskip("plotly")
    site = hostile_run.folder / "site"
    proc = cli("dashboard", "--db", hostile_run.db, "-o", site)
    assert proc.returncode == 0, shown(proc)
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 3  # index, the run's report, the op's history
    texts = [page.read_text(encoding="utf-8") for page in pages]
    assert all(hostile_text.inert(text) for text in texts)
    assert any("\\x1b]8;;http://evil.example" in text for text in texts)


HOSTILE_SCRIPT = ("import torch\n"
                  "x = torch.ones(3).cuda()  # caf\u00e9 \x1b[2J <script>alert(1)</script>\n"
                  "y = x * 2  # the profile makes aten.mul.Tensor raise the hostile text\n")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["table", "md", "sarif"])
def test_porting_report_of_a_script_that_raises_hostile_text_is_inert(hostile_run, fmt, hostile_text, markdown_html):
    script = hostile_run.folder / "hostile_train.py"
    script.write_text(HOSTILE_SCRIPT, encoding="utf-8")
    out = hostile_run.folder / f"port.{fmt}"
    proc = cli(script, "--device", "sim", "--sim-profile", hostile_run.profile, "--format", fmt,
               *(["-o", out] if fmt != "table" else []))
    assert proc.returncode == 0, shown(proc)
    text = proc.stdout.decode("utf-8") if fmt == "table" else out.read_text(encoding="utf-8")
    # The patch quotes the script's source verbatim, in a fence: in Markdown it is code, not markup.
    assert hostile_text.inert(text, markup=fmt not in (*hostile_text.plain_text_formats, "md"))
    assert hostile_text.inert(shown(proc), markup=False)
    assert "aten.mul.Tensor" in text
    if fmt == "sarif":
        assert any(hostile_text.osc_link in r["message"]["text"] for r in json.loads(text)["runs"][0]["results"])
    elif fmt == "md":
        html = markdown_html(text)
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
def test_a_stdout_that_cannot_encode_unicode_never_crashes(hostile_run, command, hostile_text):
    (hostile_run.folder / "none.yaml").write_text("schema: 1\nexpected_failures: []\n")
    args = [a.format(folder=hostile_run.folder) for a in command]
    proc = cli(*args, "--db", hostile_run.db, PYTHONIOENCODING="ascii")
    assert proc.returncode in (0, 1) and b"Traceback" not in proc.stderr, shown(proc)
    assert hostile_text.inert(shown(proc), markup=False) and b"x1b" in proc.stdout + proc.stderr


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
