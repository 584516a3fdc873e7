"""Run every test as on a fresh machine: no state from outside the clone.

A test must not read what an earlier run, another project or the developer's shell left behind
(a warm Inductor cache, an OpInfo index in ~/.cache, a ``NEURON_CHECK_DB`` export, ``TORCH_LOGS``),
nor leave anything there. HOME, every cache and TMPDIR point into one temporary folder for the
session; the subprocesses that tests start inherit it.

The suite runs on every core (pytest-xdist, pyproject's addopts): each worker process isolates
itself in a folder of its own inside the controller's, and uses its share of the cores for
torch's threads. The workers share two things: the sim device's build cache, so the C++
extension is compiled once per run, not once per worker (its build lock is made for that), and
the docs examples' seed database (tests/docs/test_docs_examples.py), built once under a lock.
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
    "NEURON_CHECK_SIM_CACHE",
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


# The controller's folder, which its xdist workers inherit through the environment.
_RUN_ROOT_ENV = "NEURON_CHECK_TESTS_RUN_ROOT"
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")


def _make_root() -> str:
    """The process's private folder. Ray's socket paths must stay short (AF_UNIX limit), so a
    single process's (or xdist controller's) root sits right under the temporary folder, and a
    worker's one level below, named by its id (gw0, gw1...)."""
    run_root = os.environ.get(_RUN_ROOT_ENV)
    if _WORKER and run_root:
        root = os.path.join(run_root, _WORKER)
        os.makedirs(root)
    else:
        root = tempfile.mkdtemp(prefix="nc-")
        os.environ[_RUN_ROOT_ENV] = root
    os.chmod(root, 0o755)
    return root


def _share_the_cores() -> None:
    """Two workers each running torch on every core would fight over them; each gets its share
    (the tests' subprocesses inherit it). A thread count set by the caller is kept."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, cores // workers)))


# At import, before any test module imports torch or Transformers (some read their cache
# locations once, at import); pytest_unconfigure below removes the folder at the end.
_ROOT = _make_root()
_SAVED = _isolate(_ROOT)
if _WORKER:
    _share_the_cores()
    os.environ["NEURON_CHECK_SIM_CACHE"] = os.path.join(os.environ[_RUN_ROOT_ENV], "sim-cache")


@pytest.fixture(scope="session", autouse=True)
def isolated_environment():
    """The session's private HOME, caches and TMPDIR (see the module docstring)."""
    return _ROOT


def _restore_sim_profile():
    before = os.environ.get("NEURON_CHECK_SIM_PROFILE")
    yield
    if before is None:
        os.environ.pop("NEURON_CHECK_SIM_PROFILE", None)
    else:
        os.environ["NEURON_CHECK_SIM_PROFILE"] = before


@pytest.fixture(autouse=True)
def sim_profile_of_this_test_only():
    """Opening sim with a profile records it in NEURON_CHECK_SIM_PROFILE for the workers to
    inherit (conformance/backends/opening.py); a test that does so in-process must not hand it
    to the next test's subprocesses (a later `--device cuda` case then read as `--sim-profile`)."""
    yield from _restore_sim_profile()


@pytest.fixture(scope="module", autouse=True)
def sim_profile_of_this_module_only():
    """The same for a module fixture that opens sim with a profile (test_quant_reports' in-process
    `quant --sim-profile`): it is set up before any test's own fixture looks, so only the module's
    teardown can undo it."""
    yield from _restore_sim_profile()


def pytest_unconfigure(config):
    """Restore the environment and remove the folder, in every process: an xdist controller
    runs no test (so no session fixture) but owns the folder its workers' folders are in."""
    _restore(_SAVED)
    import multiprocessing.util
    import shutil

    # multiprocessing's own exit work first: the engine's worker server (preforked.py) listens
    # on a socket in a temporary folder inside ours, which its exit hook would find gone.
    multiprocessing.util._exit_function()
    shutil.rmtree(_ROOT, ignore_errors=True)


# -- scheduling across xdist workers ---------------------------------------------------------
# A test file is one unit of work (module fixtures run once), except each docs page's examples,
# which are a unit of their own: the docs file holds the most work of any file (about 450 s of
# examples in all), and as one unit it kept one worker busy while the other ran dry. Units start
# heaviest first, so that the run does not end on one long unit while the other worker waits:
# the prefixes below are the heaviest units measured (`python -m pytest --durations=80`, 2 cores),
# in that order; every other file follows in collection order.
_DOCS_PAGES = "tests/docs/test_docs_examples.py::test_page_examples_run["
# The Ray cluster tests are not among them: started in the run's first minute, beside the sim
# extension's build, their nodes timed out starting up.
_HEAVIEST_FIRST = (
    _DOCS_PAGES + "docs/diffusers.md]",
    _DOCS_PAGES + "docs/fleet.md]",
    _DOCS_PAGES + "docs/flex-attention.md]",
    _DOCS_PAGES + "docs/dist.md]",
    "tests/conformance/test_engine_signals.py",
    _DOCS_PAGES + "docs/fleet-clusters.md]",
    "tests/conformance/test_dist_zero.py",
    "tests/conformance/test_dist_checkpoint.py",
    "tests/porting_cli/test_trace_processes.py",
    "tests/conformance/test_dist.py",
    _DOCS_PAGES,
)


# Files whose tests share one Ray head (the `ray_head` fixture of tests/conformance/conftest.py):
# one unit, so that one worker starts one head for them all, in collection order.
_RAY_HEAD_FILES = ("tests/conformance/test_engine_ray.py", "tests/conformance/test_engine_ray_cluster.py",
                   "tests/conformance/test_quant_ray.py")


def _unit(nodeid: str) -> str:
    if nodeid.startswith(_DOCS_PAGES):
        return nodeid
    path = nodeid.split("::", 1)[0]
    return _RAY_HEAD_FILES[0] if path in _RAY_HEAD_FILES else path


def _weight(nodeid: str) -> int:
    return next((rank for rank, prefix in enumerate(_HEAVIEST_FIRST) if nodeid.startswith(prefix)),
                len(_HEAVIEST_FIRST))


def pytest_collection_modifyitems(config, items):
    """Heaviest units first (a stable sort: a file's tests stay together and in order)."""
    items.sort(key=lambda item: _weight(item.nodeid))


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class HeaviestFirst(LoadScopeScheduling):
        """xdist's per-scope scheduling with the units above, in collection order."""

        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False  # keep the heaviest-first order of the collection
    return HeaviestFirst(config, log)
