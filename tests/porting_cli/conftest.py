"""Shared helpers of the porting-check tests: run the CLI as a user would, find marked lines."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"
FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def marked():
    """marked(path, mark) -> the line number of `# MARK: mark` in path."""
    return marked_line


@pytest.fixture
def alive():
    """alive(pid) -> whether the process exists and is not a zombie."""
    return live


def marked_line(path: Path, mark: str) -> int:
    """The line holding `# MARK: mark` in `path`, so assertions name exact lines."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if f"# MARK: {mark}" in line:
            return number
    raise AssertionError(f"no MARK {mark} in {path}")


def cli_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NEURON_CHECK_SIM_PROFILE"}
    env["PYTHONPATH"] = str(REPO)
    return env


@pytest.fixture
def neuron_check(tmp_path):
    """Run `neuron-check ARGS --format json` in tmp_path; returns (completed process, report or None).

    `copy`: script names under scripts/ to copy into tmp_path first; `profile`: a sim profile."""

    def run(*args: str, copy: tuple[str, ...] = (), profile: dict | None = None, timeout: float = 300):
        for name in copy:
            shutil.copy(SCRIPTS / name, tmp_path / name)
        args = list(args)
        if profile is not None:
            (tmp_path / "profile.json").write_text(json.dumps(profile))
            at = args.index("--") if "--" in args else len(args)
            args[at:at] = ["--sim-profile", "profile.json"]
        command = [sys.executable, "-m", "porting_cli", *args]
        out = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=timeout, env=cli_env())
        report = json.loads(out.stdout) if out.stdout.strip().startswith("{") else None
        return out, report

    return run


def live(pid: int) -> bool:
    """Whether a process exists and is not a zombie (read from /proc, no psutil)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rpartition(b")")[2].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")
