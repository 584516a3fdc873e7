"""The fast path of the static scan: the content cache, the batch scan, and what it imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from porting_cli.analysis.fix import fix_source
from porting_cli.analysis.scan import ScanError, scan_source
from porting_cli.analysis import batch_scan as batch
from porting_cli.analysis.batch_scan import ScanOptions, scan_paths
from porting_cli.analysis.scan.cache import ScanCache

SCRIPT = """import torch

model = torch.nn.Linear(4, 4).cuda()
torch.cuda.synchronize()
x = torch.randn(2, 4, device="cuda")
"""


@pytest.fixture
def cache(tmp_path) -> ScanCache:
    return ScanCache(tmp_path / "cache")


@pytest.fixture
def count_analyses(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = batch.analyse

    def counting(text, path):
        seen.append(path)
        return real(text, path)
    monkeypatch.setattr(batch, "analyse", counting)
    return seen


def test_second_scan_of_unchanged_file_hits_the_cache(tmp_path, cache, count_analyses):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    first, = scan_paths([(str(script), "train.py")], ScanOptions(cache=cache))
    second, = scan_paths([(str(script), "train.py")], ScanOptions(cache=cache))
    assert count_analyses == ["train.py"]
    assert (first.cached, second.cached) == (False, True)
    assert second.result == first.result == scan_source(SCRIPT, "train.py")
    assert second.fix.new_text == first.fix.new_text == fix_source(SCRIPT, "train.py").new_text
    assert second.fix.diff() == first.fix.diff() != ""


def test_an_edit_invalidates_the_entry(tmp_path, cache, count_analyses):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    scan_paths([(str(script), "train.py")], ScanOptions(cache=cache))
    script.write_text(SCRIPT + "torch.cuda.empty_cache()\n")
    edited, = scan_paths([(str(script), "train.py")], ScanOptions(cache=cache))
    assert count_analyses == ["train.py", "train.py"]
    assert not edited.cached
    assert [f.line for f in edited.result.findings] == [f.line for f in scan_source(script.read_text()).findings]
    assert edited.result.findings[-1].line == 6


def test_cached_findings_take_the_path_they_are_asked_for(tmp_path, cache):
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(SCRIPT)
    a, = scan_paths([(str(tmp_path / "a.py"), "a.py")], ScanOptions(cache=cache))
    b, = scan_paths([(str(tmp_path / "b.py"), "pkg/b.py")], ScanOptions(cache=cache))
    assert b.cached  # same text as a.py
    assert {f.path for f in b.result.findings} == {"pkg/b.py"}
    assert b.fix.diff().startswith("--- a/pkg/b.py")


def test_a_new_scanner_identity_misses(tmp_path, cache, count_analyses, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    scan_paths([(str(script), "train.py")], ScanOptions(cache=cache))
    monkeypatch.setattr("porting_cli.analysis.scan.cache.scanner_identity", lambda: "another rule table")
    again, = scan_paths([(str(script), "train.py")], ScanOptions(cache=cache))
    assert not again.cached and len(count_analyses) == 2


def test_a_corrupt_entry_is_a_miss_not_an_error(tmp_path, cache):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    scan_paths([(str(script), "train.py")], ScanOptions(cache=cache))
    entry, = (tmp_path / "cache").rglob("*.json")
    entry.write_text("{not json")
    again, = scan_paths([(str(script), "train.py")], ScanOptions(cache=cache))
    assert not again.cached and again.result == scan_source(SCRIPT, "train.py")


def test_bad_files_come_back_as_errors_in_place(tmp_path, cache):
    (tmp_path / "ok.py").write_text(SCRIPT)
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "latin1.py").write_bytes(b"x = '\xe9'\n")
    answers = scan_paths([(str(tmp_path / n), n) for n in ("broken.py", "ok.py", "latin1.py")],
                         ScanOptions(cache=cache))
    assert isinstance(answers[0], ScanError) and "syntax error" in str(answers[0])
    assert answers[1].result.findings
    assert isinstance(answers[2], ScanError) and "not UTF-8" in str(answers[2])
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 1  # errors are never cached


def test_parallel_scan_gives_the_serial_answer(tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "PARALLEL_MIN_LINES", 0)
    items = []
    for n in range(4):
        path = tmp_path / f"m{n}.py"
        path.write_text(SCRIPT + "\n" * n + "torch.cuda.manual_seed(0)\n")
        items.append((str(path), path.name))
    serial = scan_paths(items, ScanOptions(jobs=1, cache=ScanCache(None)))
    parallel = scan_paths(items, ScanOptions(jobs=2, cache=ScanCache(None)))
    assert [s.result for s in parallel] == [s.result for s in serial]
    assert [s.fix.new_text for s in parallel] == [s.fix.new_text for s in serial]


def test_no_cache_env_turns_it_off(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert ScanCache.default().directory == tmp_path / "neuron-check" / "scan"
    monkeypatch.setenv("NEURON_CHECK_NO_CACHE", "1")
    assert ScanCache.default().directory is None


# The command group's main, not `python -m porting_cli`: that entry point ends the process
# with os._exit (porting_cli.cli.app.console_main), so nothing could be printed after it.
IMPORTS_OF_A_RUN = """
import json, sys
sys.argv = ["neuron-check", *sys.argv[1:]]
from porting_cli.cli.app import main
try:
    main(args=sys.argv[1:], prog_name="neuron-check")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""

HEAVY = ("torch", "transformers", "jinja2", "numpy", "pandas")


def _modules_of_run(args: list[str], env_dir: Path) -> set[str]:
    import os

    env = {**os.environ, "XDG_CACHE_HOME": str(env_dir),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                          os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", IMPORTS_OF_A_RUN, *args], capture_output=True,
                          text=True, env=env, timeout=120)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("fmt", ["table", "json", "sarif"])
def test_static_only_imports_nothing_heavy_and_no_libcst(tmp_path, fmt):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    args = [str(script), "--static-only", "--format", fmt, "-o", str(tmp_path / "report")]
    cold = _modules_of_run(args, tmp_path / "cache")
    assert not {m.split(".")[0] for m in cold} & {*HEAVY, "libcst"}  # the scan runs on ast alone
    warm = _modules_of_run(args, tmp_path / "cache")
    assert not {m.split(".")[0] for m in warm} & {*HEAVY, "libcst"}
    assert (tmp_path / "report").read_text()


def test_diff_of_a_cached_file_still_works(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    _modules_of_run([str(script), "--static-only", "-o", str(tmp_path / "r")], tmp_path / "cache")
    import os

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-m", "porting_cli", str(script), "--diff"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == fix_source(SCRIPT, str(script)).diff()


def test_the_collector_is_tuned_during_the_analysis_and_restored_after(tmp_path, monkeypatch):
    import gc

    seen = []
    real = batch.analyse

    def recording(text, path):
        seen.append((gc.get_threshold()[0], gc.get_freeze_count() > 0))
        return real(text, path)
    monkeypatch.setattr(batch, "analyse", recording)
    before = gc.get_threshold(), gc.get_freeze_count()
    (tmp_path / "train.py").write_text(SCRIPT)
    scan_paths([(str(tmp_path / "train.py"), "train.py")], ScanOptions(jobs=1, cache=ScanCache(None)))
    assert seen == [(batch.GC_THRESHOLD, True)]
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
