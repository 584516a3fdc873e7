"""The corpus file (labels.json) and where its scripts live locally. Shared by fetch and score."""

from __future__ import annotations

import json
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
