"""`neuron-check trace`: device time per source line, on sim with a fault profile.

The profile sends aten.median through sim's CPU fallback and delays aten.tanh by 30 ms per call,
so the delayed op's line must be the top line; the script's `.item()` is a sync on its line.
One run of the command serves every assertion (module-scoped fixture): the run is the slow part.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.porting_cli.test_trace_runtime import REPO, SCRIPTS, mark_line

SCRIPT = "profiled_train.py"
PROFILE = {"name": "trace-test", "fallback_ops": ["aten.median.default"],
           "faults": [{"op": "aten.tanh.default", "kind": "delay", "value": 0.03}]}


def trace(tmp: Path, *options: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NEURON_CHECK_SIM_PROFILE"}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "porting_cli", "trace", SCRIPT, *options], cwd=tmp,
                          capture_output=True, text=True, timeout=240, env=env)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trace")
    shutil.copy(SCRIPTS / SCRIPT, tmp / SCRIPT)
    (tmp / "profile.json").write_text(json.dumps(PROFILE))
    out = trace(tmp, "--sim-profile", "profile.json", "--warmup", "1", "--steps", "2",
                "--format", "parquet", "-o", "prof", "--chrome-trace", "chrome.json")
    assert out.returncode == 0, out.stderr
    import pyarrow.parquet as pq

    lines = pq.read_table(tmp / "prof" / "lines.parquet").to_pylist()
    return tmp, lines, pq.read_table(tmp / "prof" / "op_events.parquet")


def line_row(lines: list[dict], mark: str) -> dict:
    number = mark_line(SCRIPT, mark)
    return next(r for r in lines if r["file"] == SCRIPT and r["line"] == number)


def test_delayed_op_line_is_the_top_line(traced):
    _, lines, _ = traced
    top = max(lines, key=lambda r: r["device_time_s"])
    assert (top["file"], top["line"]) == (SCRIPT, mark_line(SCRIPT, "delayed"))
    assert top["device_time_s"] >= 2 * 0.03  # two profiled steps of a 30 ms delay


def test_fallback_line_lists_the_op_and_its_time(traced):
    _, lines, _ = traced
    row = line_row(lines, "fallback")
    assert json.loads(row["fallback_ops"]) == {"aten::median": 2}
    assert row["fallback_time_s"] > 0
    others = [r for r in lines if r["line"] != row["line"] and json.loads(r["fallback_ops"])]
    assert others == []


def test_item_is_a_sync_on_its_line_and_the_copy_on_its_line(traced):
    _, lines, _ = traced
    sync = line_row(lines, "sync")
    assert sync["syncs"] == 2 and json.loads(sync["sync_kinds"]) == {"item": 2}
    copy = line_row(lines, "copy")
    assert copy["copies"] == 2 and copy["copy_bytes"] == 2 * 32 * 8 * 4 and copy["syncs"] == 0


def test_backward_events_go_to_their_forward_line_and_total_to_backward(traced):
    _, lines, events = traced
    rows = events.to_pylist()
    tanh_backward = [e for e in rows if e["op"] == "aten::tanh_backward"]
    assert tanh_backward and all(e["line"] == mark_line(SCRIPT, "delayed") and e["phase"] == "backward"
                                 for e in tanh_backward)
    assert line_row(lines, "backward")["backward_total_s"] > 0
    assert line_row(lines, "forward")["backward_device_time_s"] > 0  # the Linear layers' backward


def test_lines_sum_to_the_profilers_total_and_parquet_has_the_schema(traced):
    tmp, lines, events = traced
    from porting_cli.runtime.profiler_export import EVENT_COLUMNS, LINE_COLUMNS, PARQUET_SCHEMA_VERSION

    meta = json.loads((tmp / "prof" / "meta.json").read_text())
    total = sum(r["device_time_s"] for r in lines)
    assert abs(total - meta["profiler_total_s"]) <= 0.01 * meta["profiler_total_s"]
    assert events.schema.names == list(EVENT_COLUMNS)
    assert events.schema.metadata[b"neuron_check_schema"] == str(PARQUET_SCHEMA_VERSION).encode()
    assert list(lines[0]) == list(LINE_COLUMNS)
    assert set(events.column("step").to_pylist()) == {2, 3}  # after one warm-up step
    assert json.loads((tmp / "chrome.json").read_text())["traceEvents"]


def test_bad_input_is_one_sentence_and_exit_2(tmp_path):
    out = trace(tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == f"neuron-check: error: {SCRIPT}: no such script."


def test_chrome_trace_loads_in_holistic_trace_analysis(traced, tmp_path):
    """The Chrome trace is what HTA reads: it names its rank, and its ranges name the user's lines."""
    from hta.trace_analysis import TraceAnalysis

    tmp, lines, _ = traced
    shutil.copy(tmp / "chrome.json", tmp_path / "rank-0.json")
    analysis = TraceAnalysis(trace_dir=str(tmp_path))
    frame = analysis.t.get_trace(0)
    names = set(analysis.t.symbol_table.get_sym_table()[i] for i in frame["name"].unique())
    top = lines[0]
    assert any(name.startswith(f"{top['file']}:{top['line']} ") for name in names), sorted(names)[:20]
    assert not any(name.startswith("nc|") for name in names)
    assert json.loads((tmp / "chrome.json").read_text())["distributedInfo"] == {"rank": 0}


def test_graph_breaks_and_recompiles_are_counted_on_their_lines(tmp_path):
    """A planted graph break lands on its line with Dynamo's reason; the recompile that a new
    length forces lands on the compiled function's own line, with the guard that failed."""
    script = "compiled_train.py"
    shutil.copy(SCRIPTS / script, tmp_path / script)
    env = {k: v for k, v in os.environ.items() if k != "NEURON_CHECK_SIM_PROFILE"}
    out = subprocess.run([sys.executable, "-m", "porting_cli", "trace", script, "--device", "sim", "--warmup", "1",
                          "--steps", "2", "--format", "json"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=240, env=dict(env, PYTHONPATH=str(REPO)))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    rows = {(r["file"], r["line"]): r for r in report["lines"]}
    broken = rows[(script, mark_line(script, "break"))]
    assert broken["graph_breaks"] == 1 and broken["compile_reasons"][0].startswith("graph break: User-inserted")
    recompiled = rows[(script, mark_line(script, "forward-def"))]
    assert recompiled["recompiles"] >= 1 and "size mismatch" in " ".join(recompiled["compile_reasons"])
    assert sum(r["graph_breaks"] for r in report["lines"]) == 1
    advice = {b["site"]: b["advice"] for b in report["bottlenecks"]}
    assert "1 graph break(s)" in advice[f"{script}:{mark_line(script, 'break')}"]
