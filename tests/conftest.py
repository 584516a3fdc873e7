"""Run every test as on a fresh machine: no state from outside the clone.

A test must not read what an earlier run, another project or the developer's shell left behind
(a warm Inductor cache, an OpInfo index in ~/.cache, a ``NEURON_CHECK_DB`` export, ``TORCH_LOGS``),
nor leave anything there. HOME, every cache and TMPDIR point into one temporary folder for the
session; the subprocesses that tests start inherit it.
"""

from __future__ import annotations

import os
import tempfile

import pytest

# Variables that change what neuron-check, torch or Transformers do; none may leak in.
_UNSET = (
    "NEURON_CHECK_DB",
    "NEURON_CHECK_SIM_PROFILE",
    "NEURON_CHECK_SERIES",
    "TORCH_LOGS",
    "TORCH_TRACE",
    "TORCH_COMPILE_DEBUG",
    "TORCHDYNAMO_VERBOSE",
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES",
    "PYTORCH_TEST_WITH_SLOW",
    "PYTORCH_TEST_SKIP_FAST",
    "CUDA_VISIBLE_DEVICES",
    "RAY_ADDRESS",
    "PYTHONSTARTUP",
)

_HOME_DIRS = {
    "HOME": "home",
    "XDG_CACHE_HOME": "home/.cache",
    "XDG_CONFIG_HOME": "home/.config",
    "XDG_DATA_HOME": "home/.local/share",
    "TORCH_HOME": "home/.cache/torch",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
    "HF_HOME": "home/.cache/huggingface",
    "HF_DATASETS_CACHE": "home/.cache/huggingface/datasets",
    "MPLCONFIGDIR": "home/.config/matplotlib",
    "RAY_TMPDIR": "ray",
    "TMPDIR": "tmp",
}

# Nothing in the tests may reach a hub; say so to every library that would try.
_OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def _isolate(root: str) -> dict[str, str | None]:
    saved = {name: os.environ.get(name) for name in (*_UNSET, *_HOME_DIRS, *_OFFLINE)}
    for name in _UNSET:
        os.environ.pop(name, None)
    for name, sub in _HOME_DIRS.items():
        path = os.path.join(root, sub)
        os.makedirs(path, exist_ok=True)
        # Like /tmp: tests that drop to an unprivileged user (read-only database checks) share them.
        os.chmod(path, 0o1777)
        os.environ[name] = path
    os.environ.update(_OFFLINE)
    tempfile.tempdir = None  # recomputed from TMPDIR on next use
    return saved


def _restore(saved: dict[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    tempfile.tempdir = None


# At import, before any test module imports torch or Transformers (some read their cache
# locations once, at import); the session fixture below removes the folder at the end.
# Ray's socket paths must stay short (AF_UNIX limit), so the root sits right under /tmp.
_ROOT = tempfile.mkdtemp(prefix="nc-")
os.chmod(_ROOT, 0o755)
_SAVED = _isolate(_ROOT)


@pytest.fixture(scope="session", autouse=True)
def isolated_environment():
    """The session's private HOME, caches and TMPDIR (see the module docstring)."""
    yield _ROOT
    _restore(_SAVED)
    import shutil

    shutil.rmtree(_ROOT, ignore_errors=True)
