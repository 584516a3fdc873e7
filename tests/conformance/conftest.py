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


# -- one Ray head for the Ray tests ------------------------------------------------------------
LOOPBACK = "127.0.0.1"
# Read by Ray's processes when they start: no usage reports, and no memory monitor (it kills
# workers when the whole machine, shared with other jobs, is nearly full: that tests the machine).
RAY_QUIET_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_memory_monitor_refresh_ms": "0"}


class RayNodes:
    """The nodes one test module adds to the shared head, started with RAY_QUIET_ENV; close()
    removes those still up, so the next module finds the head as it was."""

    def __init__(self, head) -> None:
        self.head, self.added = head, []

    def add(self, **node_args):
        with pytest.MonkeyPatch.context() as patch:
            for name, value in RAY_QUIET_ENV.items():
                patch.setenv(name, value)
            node = self.head.add_node(**{"node_ip_address": LOOPBACK, **node_args})
        self.added.append(node)
        return node

    def close(self) -> None:
        for node in self.added:
            if node in self.head.worker_nodes:
                self.head.remove_node(node)


@pytest.fixture(scope="session")
def ray_head():
    """A loopback Ray cluster's head for every Ray test module of this process that can share
    one (test_engine_ray.py, test_engine_ray_cluster.py, test_quant_ray.py: tests/conftest.py sends
    them to the same xdist worker): a head's start is most of a Ray start. It has no CPU, so it hosts the
    drivers and no actor; a module adds the nodes it runs on (ray_nodes). Every process of
    it is stopped when the session ends, pass or fail."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'neuron-check[ray]'")
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as patch:
        for name, value in RAY_QUIET_ENV.items():
            patch.setenv(name, value)
        head = Cluster(initialize_head=True, head_node_args={"node_ip_address": LOOPBACK, "num_cpus": 0,
                                                              "include_dashboard": False})
    try:
        yield head
    finally:
        if ray.is_initialized():
            ray.shutdown()
        head.shutdown()


@pytest.fixture(scope="module")
def ray_nodes(ray_head):
    """This module's nodes on the shared head (RayNodes), removed when the module ends."""
    nodes = RayNodes(ray_head)
    try:
        yield nodes
    finally:
        nodes.close()
