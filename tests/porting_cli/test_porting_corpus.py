"""The porting corpus's labels and its scorer (benchmarks/porting_corpus): the yardstick of issue 30.

The labelled scripts themselves are third-party and never in the repository, so these tests check
the labels file's shape and that the scorer counts hits, misses, false alarms (prose apart) and
verdicts exactly, against a stand-in tool that prints a fixed report.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

CORPUS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "porting_corpus"
CATEGORIES = {"training", "inference", "distributed", "diffusion", "rl", "speech", "serving"}


@pytest.fixture
def corpus(monkeypatch):
    monkeypatch.syspath_prepend(str(CORPUS_DIR))
    import corpus as module
    return module


@pytest.fixture
def score(corpus):
    import score as module
    return module


def test_labels_are_pinned_split_and_consistent(corpus):
    scripts = corpus.load_corpus()
    assert len(scripts) >= 40
    assert len({s["id"] for s in scripts}) == len(scripts)
    assert CATEGORIES <= {s["category"] for s in scripts}
    for half in ("dev", "held"):
        assert sum(s["half"] == half for s in scripts) >= 20
    for s in scripts:
        assert re.fullmatch(r"[0-9a-f]{40}", s["commit"]), s["id"]
        assert isinstance(s["blocked"], bool) and s.get("labelled"), s["id"]
        code = [item["line"] for item in s["cuda"]]
        assert len(code) == len(set(code)), f"{s['id']}: a line labelled twice"
        assert not set(code) & set(s["prose"]), f"{s['id']}: a line both code and prose"
        assert not set(code) & set(s["either"]), f"{s['id']}: a line both code and either"
        assert not s["blocked"] or s.get("why"), f"{s['id']}: a blocked label says why"


def _fake_tool(corpus, tmp_path: Path, report: dict):
    fake = tmp_path / "fake_neuron_check.py"
    fake.write_text(f"import sys\nprint({json.dumps(json.dumps(report))})\n")
    return corpus.Tool(command=(sys.executable, str(fake)))


def _finding(line: int, col: int, end_col: int, rule: str = "NC999") -> dict:
    return {"rule": rule, "line": line, "col": col, "end_line": line, "end_col": end_col, "fixable": False}


def test_score_counts_hits_misses_false_alarms_and_prose(corpus, score, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""\
        import torch  # line 1
        device = "cuda"  # line 2: code
        x = torch.ones(2).cuda()  # line 3: code
        # runs on a GPU  (line 4: prose)
        y = 1  # line 5: neither
        z = 2  # line 6: either
        """))
    entry = {"id": "t", "half": "dev", "blocked": True, "cuda": [{"line": 2, "col": 9}, {"line": 3, "col": 18}],
             "prose": [4], "either": [6]}
    report = {"verdict": "ready-with-fixes",
              "findings": [_finding(2, 10, 16), _finding(4, 3, 8), _finding(5, 1, 2), _finding(6, 1, 2)]}
    result = score.score_script(_fake_tool(corpus, tmp_path, report), entry, script)
    assert (result.hit, result.missed, result.at_token) == ([2], [3], 1)
    assert result.false_alarms == [4, 5]   # the `either` line 6 is not a false alarm
    assert result.prose_alarms == [4]
    assert not result.verdict_ok           # blocked by the label, not by the tool


def test_score_reports_a_tool_that_ends_without_a_report(corpus, score, tmp_path):
    script = tmp_path / "s.py"
    script.write_text("x = 1\n")
    crashing = tmp_path / "crash.py"
    crashing.write_text("import sys\nsys.stderr.write('internal error')\nsys.exit(3)\n")
    entry = {"id": "s", "half": "dev", "blocked": False, "cuda": [], "prose": [], "either": []}
    result = score.score_script(corpus.Tool(command=(sys.executable, str(crashing))), entry, script)
    assert result.error and "exit 3" in result.error and "internal error" in result.error


@pytest.mark.parametrize("fixed, problem", [
    # the prelude above the late `import torch`: DEVICE's line uses torch unbound
    ("import os\nDEVICE = torch.accelerator.current_accelerator()\nos.environ['X'] = '1'\nimport torch\n"
     "x = torch.ones(1).to(DEVICE)\n", "`torch` unbound at line 2 of the fixed file"),
    ("import os\nos.environ['X'] = '1'\nimport torch\nDEVICE = torch.accelerator.current_accelerator()\n"
     "x = torch.ones(1).to(DEVICE)\n", None),
])
def test_the_fix_check_counts_a_fixed_file_that_uses_a_name_before_it_is_bound(score, corpus, fixed, problem):
    original = "import os\nos.environ['X'] = '1'\nimport torch\nx = torch.ones(1).cuda()\n"
    assert score.name_problem(corpus.Tool(), original, fixed) == problem


def test_a_name_the_original_already_used_unbound_is_not_the_fixs(score, corpus):
    original = "x = undefined_helper()\n"
    assert score.name_problem(corpus.Tool(), original, "import torch\nx = undefined_helper()\n") is None
