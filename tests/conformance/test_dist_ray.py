"""`neuron-check dist --executor ray` on a tiny local Ray instance (2 CPUs) with the sim device:
a world in a placement group gives the local runner's statuses, a hang is TIMEOUT and a fresh
world takes the next item, and the instance the executor started leaves no process behind."""

from __future__ import annotations

import json
import os
import time

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'neuron-check[ray]'")

from conformance.engine.config import RunConfig  # noqa: E402
from conformance.dist.plan import DistOptions  # noqa: E402
from conformance.dist.ray_world import RayWorldExecutor  # noqa: E402
from conformance.dist.world import WorldSpec  # noqa: E402
from op_db.records import Status, WorkItem  # noqa: E402

PROFILE = {"collective_faults": [{"op": "all_reduce", "kind": "scale", "value": 1.5, "dtype": "bfloat16"},
                                 {"op": "all_gather", "kind": "hang", "rank": 1}]}
EXPECTED = {
    WorkItem("dist", "all_reduce.sum", "contig", "bfloat16", "eager"): Status.MISMATCH,
    WorkItem("dist", "all_gather", "contig", "float32", "eager"): Status.TIMEOUT,
    WorkItem("dist", "broadcast", "contig", "float32", "eager"): Status.PASS,  # in a fresh world
}


def _children() -> list[int]:
    """Live (not zombie) processes whose parent is this one."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(os.getpid()) and fields[0] != "Z":
            found.append(int(name))
    return found


def test_ray_worlds_give_the_local_statuses_and_leave_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    (tmp_path / "profile.json").write_text(json.dumps(PROFILE))
    # The limit is generous: on a loaded 2-core machine a passing item took over 8 s.
    config = RunConfig(backend="sim", device="sim", timeout_s=20.0, executor="ray",
                       sim_profile=str(tmp_path / "profile.json"), suite_options=DistOptions(world_size=2))
    before = set(_children())
    results = []
    RayWorldExecutor(WorldSpec(2, ("sim", "sim"))).execute(list(EXPECTED), config, results.append)
    assert {r.item: r.status for r in results} == EXPECTED, [r.message for r in results]
    hung = next(r for r in results if r.status is Status.TIMEOUT)
    assert "rank(s) 1" in hung.message
    assert not ray.is_initialized()
    deadline = time.monotonic() + 10
    while set(_children()) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert set(_children()) - before == set()
