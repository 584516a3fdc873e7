"""Rules speak for the installed torch (issue 45): integer devices, and guards as written."""

from __future__ import annotations

import ast

import pytest

from porting_cli.analysis.fix import fix_source
from porting_cli.analysis.scan import scan_file, scan_source, torch_semantics
from porting_cli.analysis.scan.torch_semantics import TorchSemantics, parse_version

from .test_scan import FIXTURES, by_line, expected_from_comments

TORCH24 = FIXTURES / "integer_devices_torch24.py"


@pytest.fixture
def torch_2_4(monkeypatch):
    """The scan states torch 2.4's semantics, as it does where torch 2.4 is installed."""
    monkeypatch.setattr(torch_semantics, "installed", lambda: TorchSemantics((2, 4)))


@pytest.mark.parametrize("text, version", [("2.13.0+cpu", (2, 13)), ("2.5.0a0+git1", (2, 5)),
                                           ("2.4.1", (2, 4)), ("nightly", None)])
def test_the_version_is_read_as_major_minor(text, version):
    assert parse_version(text) == version


def test_the_installed_torch_is_read_without_importing_it():
    torch_semantics.installed.cache_clear()
    assert torch_semantics.installed().version >= (2, 13)  # pyproject: torch>=2.13
    assert torch_semantics.installed().integer_device_is_accelerator
    source = open(torch_semantics.__file__, encoding="utf-8").read()
    assert not any(isinstance(n, (ast.Import, ast.ImportFrom)) and "torch" in ast.dump(n).split("'")
                   for n in ast.walk(ast.parse(source)))


@pytest.mark.parametrize("version, accelerator", [((2, 4), False), ((2, 5), True), ((2, 13), True),
                                                  (None, False)])
def test_an_integer_device_is_the_accelerator_from_torch_2_5(version, accelerator):
    assert TorchSemantics(version).integer_device_is_accelerator is accelerator


def test_on_torch_2_4_integer_devices_are_cuda_devices_to_fix(torch_2_4):
    assert by_line(scan_file(TORCH24).findings) == expected_from_comments(TORCH24)
    fixed = fix_source(TORCH24.read_text()).new_text
    assert "torch.device(DEVICE.type, 0)" in fixed and "torch.device(DEVICE.type, LOCAL_RANK)" in fixed


def test_on_the_installed_torch_integer_devices_are_information_with_the_version():
    found = by_line(scan_file(TORCH24).findings)
    assert found == {9: ["NC111"], 10: ["NC111"], 11: ["NC111"], 12: ["NC111"], 13: ["NC111"],
                     14: ["NC106", "NC203"]}
    info = [f for f in scan_file(TORCH24).findings if f.rule_id == "NC111"]
    assert all(f.severity == "info" and f.effort == "none" and not f.fixable for f in info)
    assert all("torch 2.5" in f.message and "installed torch 2.1" in f.message for f in info)


def test_an_integer_device_on_the_installed_torch_is_left_as_it_is():
    source = "import torch\nx = torch.ones(1).to(0)\nd = torch.device(0)\n"
    assert fix_source(source).new_text == source


@pytest.mark.parametrize("call, index", [("torch.device(0)", "0"), ("torch.device(device=0)", "0"),
                                         ("torch.device(r)", "r"), ("torch.device(device=r)", "r")])
def test_an_index_given_to_torch_device_rewrites_the_call_never_a_device_in_a_device(torch_2_4, call, index):
    source = f"import os\nimport torch\nr = int(os.getenv('LOCAL_RANK'))\nd = {call}\n"
    fixed = fix_source(source).new_text
    assert f"\nd = torch.device(DEVICE.type, {index})\n" in fixed
    assert "torch.device(torch.device" not in fixed and "device=torch.device" not in fixed


# -- guards are described from the branches as written ------------------------------------------------
@pytest.mark.parametrize("source", [
    "xformers_available = is_xformers_available()\nif xformers_available:\n    import xformers.ops\n"
    "else:\n    raise ValueError('xformers is not available')\n",
    "if is_xformers_available():\n    import xformers.ops\nelse:\n    raise ImportError('pip install xformers')\n",
    "import sys\nif is_xformers_available():\n    import xformers.ops\nelse:\n    sys.exit('needs xformers')\n",
])
def test_a_guard_whose_else_stops_the_run_makes_the_library_required(source):
    assert {f.rule_id for f in scan_source(source).findings if f.family == "kernels"} == {"NC703"}


@pytest.mark.parametrize("orelse", ["    xformers = None\n", "    print('no xformers: plain attention')\n"])
def test_a_guard_whose_else_carries_on_keeps_the_library_optional(orelse):
    source = f"if is_xformers_available():\n    import xformers.ops\nelse:\n{orelse}"
    assert {f.rule_id for f in scan_source(source).findings if f.family == "kernels"} == {"NC705"}
