"""The scan's text pre-filters skip work only where it could find nothing: each source below
gets the same findings with the pre-filter as with the full analysis it skips."""

import ast
from pathlib import Path

import pytest

from porting_cli.analysis.scan import dataflow, engine
from porting_cli.analysis.scan.source import split_lines
from porting_cli.analysis.scan.engine import analyze

FLOW_SOURCES = {
    "pieces": 'import torch\nuse = dev.type == "cu" "da"\nopt = torch.optim.AdamW(p, fused=use)\n',
    "pieces over lines": 'import torch\nuse = dev.type == ("cu"  # the device\n    \'da\')\nopt = torch.optim.AdamW(p, fused=use)\n',
    "pieces after a continuation": 'import torch\nuse = dev.type == "cu" \\\n    "da"\nopt = torch.optim.AdamW(p, fused=use)\n',
    "env pieces, raw": 'import os\nimport torch\nrank = int(os.environ["LOCAL_" r"RANK"])\nm = torch.nn.Linear(2, 2).to(rank)\n',
    "argparse option": 'import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument("--gpu", type=int)\n'
                       'args = p.parse_args()\nm = torch.nn.Linear(2, 2).to(args.gpu)\n',
    "escape": 'import torch\nuse = dev.type == "\\x63uda"\nopt = torch.optim.AdamW(p, fused=use)\n',
    "env pieces": 'import os\nimport torch\nrank = int(os.environ["LOCAL_" "RANK"])\nm = torch.nn.Linear(2, 2).to(rank)\n',
    "full width": 'import torch\nrank = torch.ｃｕｄａ.current_device()\nm = torch.nn.Linear(2, 2).to(rank)\n',
    "spawn": 'import torch\nimport torch.multiprocessing as mp\n\ndef work(rank):\n    torch.nn.Linear(2, 2).to(rank)\n\n'
             'mp.spawn(work, nprocs=2)\n',
}


def _keys(text):
    return [(f.rule_id, f.line, f.col, f.message) for f in analyze(text).findings]


@pytest.mark.parametrize("name", FLOW_SOURCES)
def test_the_flow_prefilter_keeps_every_finding(name, monkeypatch):
    text = FLOW_SOURCES[name]
    filtered = _keys(text)
    monkeypatch.setattr(dataflow, "may_flow", lambda text: True)
    assert filtered == _keys(text)
    monkeypatch.setattr(dataflow, "may_flow", lambda text: False)
    assert filtered != _keys(text), "the source has a finding only the data flow makes"


def test_a_file_without_flow_words_gets_an_empty_flow():
    assert not dataflow.may_flow('import torch\nx = torch.zeros(2).to("cpu")\n')
    assert dataflow.may_flow('x = "cu" "da"\n')
    # a short string that is no piece of a longer one starts nothing (files open with "r")
    assert not dataflow.may_flow('with open(path, "r") as f:\n    modes = ["r", "d", "-"]\n')
    # the words of a device option count only where an argparse option can be declared
    docstring = '"""Trains on one gpu (pass its device_id)."""\nimport torch\nx = torch.zeros(2)\n'
    assert not dataflow.may_flow(docstring)
    assert dataflow.may_flow(docstring + 'parser.add_argument("--device_id")\n')


def test_a_kernel_named_in_full_width_letters_is_still_a_kernel():
    text = ('import ｔｒｉｔｏｎ\n\n@ｔｒｉｔｏｎ.jit\ndef kernel(x):\n    pass\n\n'
            'def launch(x):\n    kernel[(1,)](x)\n')
    assert [f.rule_id for f in analyze(text).findings].count("NC702") >= 2  # the decorator and the launch


def test_the_device_name_of_a_non_ascii_file_avoids_its_names():
    text = 'import torch\n# café\nDEVICE = 3\nx = torch.zeros(2).cuda()\n'
    assert analyze(text).ctx.device_name != engine.DEFAULT_DEVICE_NAME


TESTS = Path(__file__).resolve().parent
REPO_SOURCES = sorted(p for folder in (TESTS / "fixtures", TESTS / "scripts", TESTS.parents[1] / "examples")
                      for p in folder.rglob("*.py"))


@pytest.mark.parametrize("path", REPO_SOURCES, ids=lambda p: str(p.relative_to(TESTS.parents[1])))
def test_the_flow_prefilter_says_no_only_where_the_full_flow_is_empty(path):
    text = path.read_text(encoding="utf-8")
    if dataflow.may_flow(text):
        return  # the full flow runs anyway
    tree = ast.parse(text)
    aliases = engine.collect_imports(tree)
    full = dataflow.device_flow(tree, aliases, split_lines(text))  # no text: no pre-filter
    assert full == dataflow.DeviceFlow(), f"the pre-filter skipped the flow of {path.name}, which has one"


def test_the_repo_sources_hold_files_the_flow_prefilter_passes_and_skips():
    # the test above proves something only if some files are skipped and some are not
    said = {dataflow.may_flow(p.read_text(encoding="utf-8")) for p in REPO_SOURCES}
    assert said == {True, False}
