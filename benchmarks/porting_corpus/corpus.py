"""The corpus file (labels.json), where its scripts live locally, and how neuron-check is run on them."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABELS = HERE / "labels.json"
SCRIPTS_DIR = HERE / ".scripts"


def load_corpus() -> list[dict]:
    """The scripts of the corpus: id, category, repo, path, commit, half and their labels."""
    return json.loads(LABELS.read_text())["scripts"]


def local_script(entry: dict) -> Path | None:
    path = SCRIPTS_DIR / f"{entry['id']}.py"
    return path if path.is_file() else None


@dataclasses.dataclass(frozen=True)
class Tool:
    """How to run neuron-check: a command line, or `python -m porting_cli` of another checkout."""

    command: tuple[str, ...] = (sys.executable, "-m", "porting_cli")
    checkout: Path | None = None  # run from here, with it first on PYTHONPATH (`-m` puts the cwd first)

    @classmethod
    def from_args(cls, command: str | None, checkout: Path | None) -> "Tool":
        return cls(tuple(shlex.split(command)) if command else cls.command, checkout and checkout.resolve())

    def run(self, target: Path, *extra: str, timeout: float = 900) -> subprocess.CompletedProcess:
        # the scan cache is keyed on the scanner's own modules, not on data files a branch may add
        env = {**os.environ, "NEURON_CHECK_NO_CACHE": "1"}
        if self.checkout:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(self.checkout), env.get("PYTHONPATH"))))
        return subprocess.run([*self.command, str(Path(target).resolve()), "--static-only", *extra],
                              capture_output=True, text=True, timeout=timeout, env=env, cwd=self.checkout)

    def describe(self) -> str:
        return " ".join(self.command) + (f" (from {self.checkout})" if self.checkout else "")


def add_tool_options(parser) -> None:
    parser.add_argument("--tool", default=None, help="the neuron-check command line (default: `python -m porting_cli` of this Python)")
    parser.add_argument("--checkout", type=Path, default=None,
                        help="run the neuron-check of another checkout (a worktree of a branch): "
                             "`python -m porting_cli` from that folder, with it first on PYTHONPATH")
