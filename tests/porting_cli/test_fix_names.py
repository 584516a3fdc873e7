"""A fix never uses a name before it is bound (porting_cli.analysis.scan.bound, issue 45)."""

import ast
from pathlib import Path

import pytest

from porting_cli.analysis.fix import fix_source
from porting_cli.analysis.scan.names import new_unbound, unbound_names

FIXTURES = Path(__file__).parent / "fixtures" / "bound"


def _fix(name):
    text = (FIXTURES / name).read_text()
    result = fix_source(text, name)
    assert new_unbound(ast.parse(text), ast.parse(result.new_text)) == []
    return result


@pytest.mark.parametrize("name", ["late.py", "main.py", "th.py", "none.py"])
def test_each_fixed_file_binds_what_it_uses(name):
    result = _fix(name)
    assert "DEVICE = torch.accelerator" in result.new_text
    assert any(f.rule_id == "NC101" for f in result.applied)


def test_the_prelude_follows_a_late_torch_import():
    text = _fix("late.py").new_text
    assert text.index("import torch\n") < text.index("DEVICE =") < text.index(".to(DEVICE)")
    assert text.index('os.environ["CUDA_VISIBLE_DEVICES"]') < text.index("import torch\n")


def test_an_aliased_torch_gets_its_own_import():
    assert "import torch as th\nimport torch\n" in _fix("th.py").new_text


def test_no_safe_place_withdraws_the_fix_and_says_why():
    result = _fix("mainenv.py")
    assert not result.changed
    [nc101] = [f for f in result.remaining if f.rule_id == "NC101"]
    assert not nc101.fixable and "no safe place" in nc101.message


def test_a_module_level_use_above_the_torch_import_is_withdrawn():
    result = _fix("early.py")
    [nc102] = [f for f in result.remaining if f.rule_id == "NC102"]
    assert "`DEVICE` before it is bound" in nc102.message


def test_the_name_pass_follows_binding_order_and_scopes():
    tree = ast.parse("a = b\nb = 1\ndef f():\n    return b + c\nclass K:\n    y = 1\n    def m(self):\n"
                     "        return y\n")
    assert sorted(unbound_names(tree)) == [("b", 1), ("c", 4), ("y", 8)]
