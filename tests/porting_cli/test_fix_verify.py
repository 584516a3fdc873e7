"""`neuron-check SCRIPT --fix --verify`: each fixed file's import runs on sim (issue 45 item 2).

The fixtures (fixtures/verify/) are the places a fix's prelude can go wrong: torch imported late,
inside the main guard, under another name, or not at all. The defect tests break a fix the way the
issue found it broken (the prelude above a late `import torch`) and assert the check blames the fix,
while a script whose own import fails is the script's failure.
"""

import ast
import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from porting_cli.analysis.fix import DEVICE_COMMENT, fix_source
from porting_cli.cli.app import main
from porting_cli.runtime.verify import map_line, module_name, verify_fixes
from porting_cli.runtime.verify_scope import import_part

FIXTURES = Path(__file__).parent / "fixtures" / "verify"


def _fixed(name: str, folder: Path = FIXTURES):
    path = folder / name
    result = fix_source(path.read_text(), str(path))
    assert result.changed
    return result


def prelude_first(text: str) -> str:
    """The defect issue 45 found: the DEVICE prelude at the top, above a late `import torch`."""
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(DEVICE_COMMENT))
    prelude = lines[at:at + 2]
    return "".join(prelude + lines[:at] + lines[at + 2:])


def broken(result):
    return dataclasses.replace(result, new_text=prelude_first(result.new_text))


def test_each_fixed_fixture_imports_on_sim():
    names = ["late.py", "main.py", "th.py", "none.py"]
    checked = verify_fixes([_fixed(name) for name in names], device="sim")
    assert checked.device == "sim"
    assert [(Path(f.path).name, f.verdict) for f in checked.files] == [(name, "ok") for name in names]
    assert checked.verdict == "ok" and not checked.defective
    by_name = {Path(f.path).name: f for f in checked.files}
    assert by_name["main.py"].stopped_before.endswith("(the main guard)")
    assert by_name["late.py"].stopped_before.endswith("(a loop)")


def test_a_prelude_above_the_torch_import_is_the_fixs_defect():
    result = broken(_fixed("late.py"))
    [verdict] = verify_fixes([result]).files
    assert verdict.verdict == "fix-defect"
    assert verdict.exception["type"] == "NameError" and "'torch'" in verdict.exception["message"]
    assert verdict.exception["site"].endswith("late.py:2")  # the prelude's line, after its comment
    assert verdict.fixes == ["NC101"]  # text the fix inserted: every fix the prelude serves
    assert verdict.original is None  # the original imports


def test_a_failure_already_in_the_original_is_the_scripts():
    [verdict] = verify_fixes([_fixed("broken_original.py")]).files
    assert verdict.verdict == "script"
    assert verdict.exception["type"] == verdict.original["type"] == "ModuleNotFoundError"
    assert verdict.fixes == []


def test_a_fix_that_does_not_parse_is_the_fixs_defect_without_a_run():
    result = _fixed("th.py")
    result = dataclasses.replace(result, new_text=result.new_text.replace(".to(DEVICE)", ".to(DEVICE", 1))
    [verdict] = verify_fixes([result], device="no-such-device").files  # never opens the device
    assert verdict.verdict == "fix-defect" and verdict.exception["type"] == "SyntaxError"
    assert verdict.fixes == ["NC101"]


def test_an_import_past_its_time_limit_is_unproven_not_a_defect(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text("import time\nimport torch\nx = torch.zeros(1).cuda()\ntime.sleep(60)\n")
    [verdict] = verify_fixes([_fixed("slow.py", tmp_path)], timeout_s=0.5).files
    assert verdict.verdict == "unproven" and "time limit" in verdict.reason


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURES / "project", root)
    return root


def test_project_mode_runs_each_file_as_its_module(tmp_path):
    root = _project(tmp_path)
    fixes = [_fixed(rel, root) for rel in ("pkg/data.py", "pkg/model.py")]
    checked = verify_fixes(fixes, root=str(root), display_base=str(root))
    assert [(f.path, f.module, f.verdict) for f in checked.files] == [
        ("pkg/data.py", "pkg.data", "ok"), ("pkg/model.py", "pkg.model", "ok")]


def test_project_mode_blames_the_fixed_file_that_breaks_its_importer(tmp_path):
    root = _project(tmp_path)
    data, model = (_fixed(rel, root) for rel in ("pkg/data.py", "pkg/model.py"))
    data = dataclasses.replace(data, new_text=data.new_text.replace("= torch.accelerator", "= torch_accelerator", 1))
    checked = verify_fixes([data, model], root=str(root), display_base=str(root))
    assert [f.verdict for f in checked.files] == ["fix-defect", "fix-defect"]
    for verdict in checked.files:  # model.py fails through `from .data import BATCH`
        assert verdict.exception["type"] == "NameError"
        assert verdict.exception["site"].startswith("pkg/data.py:")
        assert verdict.fixes == ["NC101"]


def run_cli(tmp_path, monkeypatch, *args):
    monkeypatch.chdir(tmp_path)
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_the_cli_names_a_defective_fix_and_exits_1(tmp_path, monkeypatch):
    import porting_cli.analysis.fix as fix_module

    shutil.copy(FIXTURES / "late.py", tmp_path / "late.py")
    real = fix_module.fix_source
    monkeypatch.setattr(fix_module, "fix_source", lambda text, path="<string>": broken(real(text, path)))
    out = run_cli(tmp_path, monkeypatch, "late.py", "--fix", "--verify", "--format", "json")
    assert out.exit_code == 1, out.output
    doc = json.loads(out.output)
    assert doc["schema"] == 1 and doc["script"] == "late.py" and doc["written"] == ["late.py"]
    assert doc["files"] == [{"path": "late.py", "applied": ["NC101", "NC101"], "remaining": 1}]
    [verdict] = doc["verify"]["files"]
    assert doc["verify"]["verdict"] == "fix-defect" and verdict["verdict"] == "fix-defect"
    assert verdict["exception"]["site"] == "late.py:2" and verdict["fixes"] == ["NC101"]
    assert (tmp_path / "late.py.orig").read_text() == (FIXTURES / "late.py").read_text()


def test_the_cli_table_has_a_verification_section(tmp_path, monkeypatch):
    shutil.copy(FIXTURES / "broken_original.py", tmp_path / "broken_original.py")
    out = run_cli(tmp_path, monkeypatch, "broken_original.py", "--fix", "--verify")
    assert out.exit_code == 0, out.output  # the script's own failure is not the fix's
    assert "== Verification: each fixed file's import on sim" in out.output
    assert "broken_original.py  script" in out.output and "verdict: script" in out.output


def test_the_cli_project_mode_verifies_two_files(tmp_path, monkeypatch):
    root = _project(tmp_path)
    out = run_cli(tmp_path, monkeypatch, str(root.name), "--fix", "--verify", "--format", "json")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["written"] == ["pkg/data.py", "pkg/model.py"]
    assert [(f["path"], f["verdict"]) for f in doc["verify"]["files"]] == [("pkg/data.py", "ok"), ("pkg/model.py", "ok")]
    assert "DEVICE = torch.accelerator" in (root / "pkg" / "model.py").read_text()


@pytest.mark.parametrize("args", [["--verify"], ["--verify", "--diff"], ["--fix", "--verify", "--static-only"]])
def test_verify_without_a_fix_to_run_is_one_sentence_and_exit_2(tmp_path, monkeypatch, args):
    shutil.copy(FIXTURES / "th.py", tmp_path / "th.py")
    out = run_cli(tmp_path, monkeypatch, "th.py", *args)
    assert out.exit_code == 2
    assert "--verify runs what --fix writes on the device" in out.output and "Traceback" not in out.output
    assert not (tmp_path / "th.py.orig").exists()


def test_verify_in_a_format_it_does_not_print_is_exit_2(tmp_path, monkeypatch):
    shutil.copy(FIXTURES / "th.py", tmp_path / "th.py")
    out = run_cli(tmp_path, monkeypatch, "th.py", "--fix", "--verify", "--format", "sarif")
    assert out.exit_code == 2 and "--format table or --format json" in out.output


@pytest.mark.parametrize("code, stop", [
    ("import os\nif __name__ == '__main__':\n    pass\n", (2, "the main guard")),
    ("x = 1\nfor i in range(3):\n    pass\n", (2, "a loop")),
    ("def main():\n    pass\nmain()\n", (3, "a call of `main`")),
    ("import torch.multiprocessing as mp\ndef w(r):\n    pass\nmp.spawn(w, nprocs=2)\n", (4, "`spawn` of `w`")),
    ("def f(x):\n    return x\nparser = object()\nxs = [f for _ in range(2)]\n", (None, None)),
])
def test_the_import_stops_where_the_scripts_work_starts(code, stop):
    part = import_part(ast.parse(code))
    assert (part.stop_line, part.stop_reason) == stop


def test_a_fixed_line_maps_to_the_original_line_it_stands_for():
    old, new = "a\nb\nc\n", "a\nX\nY\nb\nc2\n"
    assert map_line(old, new, 1) == (1, False)
    assert map_line(old, new, 2) == (2, True)  # inserted before b
    assert map_line(old, new, 4) == (2, False)
    assert map_line(old, new, 5) == (3, True)  # c changed


def test_module_names_come_from_the_path_below_the_root():
    assert module_name("/r", "/r/pkg/sub/mod.py") == ("pkg.sub.mod", "")
    assert module_name("/r", "/r/pkg/__init__.py") == ("pkg", "")
    assert module_name("/r", "/r/scripts/my-train.py")[0] is None
