"""The test session runs as on a fresh machine (see tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path


def test_home_caches_and_tmp_are_private(isolated_environment):
    root = Path(isolated_environment)
    for path in (Path.home(), Path(os.path.expanduser("~/.cache")), Path(tempfile.gettempdir()),
                 Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]), Path(os.environ["HF_HOME"])):
        assert root in path.parents or path == root
    assert "NEURON_CHECK_DB" not in os.environ and "TORCH_LOGS" not in os.environ
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_subprocesses_inherit_the_isolation(isolated_environment):
    out = subprocess.run(
        [sys.executable, "-c", "import os, tempfile; print(os.path.expanduser('~')); "
                               "print(tempfile.gettempdir())"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    assert all(line.startswith(isolated_environment) for line in out)
