"""Fixes are text splices on ``ast`` positions: the layouts where that could go wrong.

Each expected text is what the earlier libcst-based fixer wrote for the same input
(benchmarks/scan_parity.py compares the two on a larger corpus), except where noted.
"""

from __future__ import annotations

import ast

import pytest

from porting_cli.analysis.fix import fix_source
from porting_cli.analysis.scan import scan_source

PRELUDE = ("\n# neuron-check: the current accelerator, or the CPU where there is none\n"
           'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n')

LAYOUTS = [
    pytest.param(  # an argument rebuilt in a multi-line call: ", " between, trailing comma dropped
        "import os, torch\nrank = int(os.environ['LOCAL_RANK'])\nx = x.cuda(\n    rank,\n    non_blocking=True,\n)\n"
        "z = z.cuda( )\n",
        "import os, torch\n" + PRELUDE + "rank = int(os.environ['LOCAL_RANK'])\nx = x.to(\n"
        "    torch.device(DEVICE.type, rank), non_blocking=True)\nz = z.to( DEVICE)\n", id="multi-line-call"),
    pytest.param(  # a guarded statement's bracketed lines move one level deeper with it
        "import torch\ndef f(seed):\n    torch.cuda.manual_seed_all(\n        seed)\n",
        "import torch\n" + PRELUDE + "def f(seed):\n    if torch.accelerator.is_available():\n"
        "        torch.get_device_module(DEVICE).manual_seed_all(\n            seed)\n", id="multi-line-guard"),
    pytest.param(  # the file's own indentation (a tab) for the guard's block
        "import torch\nif True:\n\ttorch.cuda.synchronize()\n",
        "import torch\nif True:\n\tif torch.accelerator.is_available():\n\t\ttorch.accelerator.synchronize()\n",
        id="tabs"),
    pytest.param(  # a replaced node takes its grouping parentheses along; a changed one keeps them
        "import torch\ny = y.to((\"cuda\"))\nz = (torch.cuda.current_device())\n",
        "import torch\n" + PRELUDE + "y = y.to(DEVICE)\n"
        "z = ((torch.accelerator.current_device_index()) if torch.accelerator.is_available() else 0)\n",
        id="parentheses"),
    pytest.param(  # columns in characters where a line has non-ASCII text before the edit
        'import torch\ns = "é"; x = x.to("cuda")\ndonnées = données.cuda()\n',
        "import torch\n" + PRELUDE + 's = "é"; x = x.to(DEVICE)\ndonnées = données.to(DEVICE)\n', id="non-ascii"),
    pytest.param(  # nested edits: the inner call's rewrite inside the outer one's
        'import torch\nd = torch.device("cuda", torch.cuda.current_device())\n',
        "import torch\n" + PRELUDE + "d = torch.device(DEVICE.type, (torch.accelerator.current_device_index() "
        "if torch.accelerator.is_available() else 0))\n", id="nested"),
]


@pytest.mark.parametrize("source, expected", LAYOUTS)
def test_fix_keeps_the_layout(source, expected):
    fixed = fix_source(source).new_text
    assert fixed == expected
    ast.parse(fixed)


def test_columns_count_characters_not_bytes():
    found = scan_source('import torch\ns = "é"; x = x.to("cuda")\n').findings
    assert [(f.rule_id, f.line, f.col, f.end_col) for f in found] == [("NC102", 2, 19, 25)]


def test_each_glued_literal_is_a_string_of_its_own():
    # "NCCL_" "DEBUG" is two literals: neither is an NCCL variable; a glued "nccl" is no backend
    found = scan_source('import os, torch\nos.environ["NCCL_" "DEBUG"] = "1"\ndist.init_process_group("nc" "cl")\n'
                        'os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n').findings
    assert [(f.rule_id, f.line, f.col) for f in found] == [("NC912", 2, 12), ("NC911", 4, 12)]


def test_a_definition_named_like_an_imported_api_is_no_use_of_it():
    # libcst saw the names of a def, a class and a keyword argument as references and "fixed"
    # `f(is_available=1)` into invalid code; only a read of the name is a use
    source = ("from torch.cuda import synchronize, is_available\ndef synchronize():\n    pass\n"
              "f(is_available=1)\nclass is_available:\n    pass\ndef g(synchronize=None):\n    return synchronize\n")
    found = scan_source(source).findings
    assert [(f.rule_id, f.line, f.col) for f in found] == [("NC999", 1, 6), ("NC205", 8, 12)]
    assert fix_source(source).new_text == source
