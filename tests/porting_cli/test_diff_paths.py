"""`--diff` names files the way `git apply` finds them, however the script was given (issue 31, item 8):
relative to the top of its git repository, else to the working folder."""

import subprocess

import pytest

from porting_cli.analysis.fix import patch_path

from .test_project import cli

SCRIPT = "import torch\n\nx = torch.ones(2).cuda()\nprint(x.sum().item())\n"


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def applies(patch: str, cwd) -> subprocess.CompletedProcess:
    (cwd / "fix.patch").write_text(patch)
    return git("apply", "--check", "fix.patch", cwd=cwd)


@pytest.fixture
def script(tmp_path):
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "train.py").write_text(SCRIPT)
    return folder / "train.py"


def test_absolute_path_outside_a_repository_is_relative_to_the_working_folder(tmp_path, script):
    out = cli([str(script), "--diff"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("--- a/x/train.py\n+++ b/x/train.py\n")
    check = applies(out.stdout, tmp_path)
    assert check.returncode == 0, check.stderr


def test_a_file_in_a_repository_is_relative_to_its_top_from_anywhere(tmp_path, script):
    assert git("init", "-q", cwd=tmp_path).returncode == 0
    elsewhere = tmp_path / "x"
    out = cli([str(script), "--diff"], elsewhere)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("--- a/x/train.py\n")
    check = applies(out.stdout, tmp_path)
    assert check.returncode == 0, check.stderr
    report = cli([str(script), "--static-only", "--format", "json"], elsewhere)
    assert '"patch": "--- a/x/train.py' in report.stdout


def test_text_without_a_file_keeps_its_label():
    assert patch_path("<string>") == "<string>"
