"""Fixtures for the sim device tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def sim_device():
    """The `sim` package, registered in this process."""
    import conformance.sim as sim

    sim.register()
    return sim


@pytest.fixture(scope="module")
def models_ctx():
    """A worker context for the models suite on sim, prepared once per test module."""
    from conformance import backends
    from conformance.engine.config import RunConfig, WorkerContext
    from conformance.models import runner

    adapter, device = backends.resolve("sim")
    adapter.init()
    context = WorkerContext(RunConfig(backend="sim", device=device), adapter)
    runner.prepare(context)
    return context


@pytest.fixture
def use_profile(sim_device):
    """Activate a profile given as a dict for one test; restores no profile afterwards."""
    sim_device.reset_fallback_log()

    def activate(data: dict):
        profile = sim_device.load_profile(data)
        sim_device.set_profile(profile)
        return profile

    yield activate
    sim_device.set_profile(None)
    sim_device.reset_fallback_log()


@pytest.fixture
def sim_python():
    """Start `python -c code` with the repo importable; returns the Popen."""
    procs = []

    def start(code: str, env: dict | None = None) -> subprocess.Popen:
        full_env = dict(os.environ)
        full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full_env.get("PYTHONPATH")]))
        full_env.update(env or {})
        p = subprocess.Popen(
            [sys.executable, "-c", code], env=full_env, cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
