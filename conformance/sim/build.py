"""Build the sim device's C++ extension once, cache it, and load it.

The extension (conformance/sim/csrc) is compiled on first use with
`torch.utils.cpp_extension` and ninja, into the user's cache directory
(``$XDG_CACHE_HOME/neuron-check/sim`` or ``~/.cache/neuron-check/sim``; ``$NEURON_CHECK_SIM_CACHE``
chooses another folder), under a key made of
the sources, torch's version and the Python ABI: a source edit or a torch upgrade builds
afresh, anything else loads the cached library directly (no ninja run, no compiler).

Several processes may start at once (a run's workers, parallel CI jobs): one builds while
the others wait on a file lock, and the library appears under its final name only when it
is complete (built in a private folder, then renamed), so nobody loads half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

from op_db.errors import InputError

NAME = "neuron_check_sim"
SOURCE_DIR = Path(__file__).resolve().parent / "csrc"
_SOURCES = ("runtime.cpp", "kernels.cpp", "module.cpp")
_CFLAGS = ["-O1", "-g0"]


CACHE_ENV = "NEURON_CHECK_SIM_CACHE"


def cache_root() -> Path:
    """Where built libraries live: $NEURON_CHECK_SIM_CACHE if set, else the user's cache."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "neuron-check" / "sim"


def build_key() -> str:
    import torch

    digest = hashlib.sha256()
    for path in sorted(SOURCE_DIR.iterdir()):
        if path.suffix in (".cpp", ".h"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(f"{torch.__version__}|{sysconfig.get_config_var('EXT_SUFFIX')}|{_CFLAGS}".encode())
    return digest.hexdigest()[:20]


def load() -> ModuleType:
    """The extension module, built first if this machine has no cached copy."""
    library = cache_root() / build_key() / f"{NAME}.so"
    if not library.exists():
        library.parent.mkdir(parents=True, exist_ok=True)
        with _locked(library.parent / "build.lock"):
            if not library.exists():
                _build(library)
    return _import(library)


def _import(library: Path) -> ModuleType:
    import torch  # noqa: F401  (the library links against torch's, which must be loaded first)

    loader = importlib.machinery.ExtensionFileLoader(NAME, str(library))
    spec = importlib.util.spec_from_file_location(NAME, library, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@contextlib.contextmanager
def _locked(path: Path):
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def compiler() -> str | None:
    return shutil.which(os.environ.get("CXX") or "c++")


def _build(library: Path) -> None:
    if compiler() is None:
        raise InputError(
            "The sim device is a C++ extension built on first use, and no C++ compiler was "
            "found: install one (Debian/Ubuntu: `apt-get install g++`; Fedora: `dnf install "
            "gcc-c++`; macOS: `xcode-select --install`) or name it in $CXX."
        )
    from torch.utils import cpp_extension

    _put_ninja_on_path()
    workdir = Path(tempfile.mkdtemp(prefix="build-", dir=library.parent))
    try:
        with _quiet_stdout():
            cpp_extension.load(
                NAME, [str(SOURCE_DIR / s) for s in _SOURCES], extra_cflags=_CFLAGS,
                build_directory=str(workdir), verbose=False, is_python_module=True,
            )
        os.replace(workdir / f"{NAME}.so", library)
    except (RuntimeError, OSError) as exc:
        raise RuntimeError(f"building the sim device's C++ extension failed: {exc}") from exc
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _put_ninja_on_path() -> None:
    """cpp_extension runs `ninja` from PATH; the pip package's copy may not be on it (a venv
    used without activating it)."""
    with contextlib.suppress(ImportError):
        import ninja

        bin_dir = getattr(ninja, "BIN_DIR", None)
        if bin_dir and shutil.which("ninja") is None:
            os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


@contextlib.contextmanager
def _quiet_stdout():
    """cpp_extension prints progress on stdout, which a run's JSON output must not carry."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
