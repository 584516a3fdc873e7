"""The Ray executor on a 2-CPU loopback Ray instance with the sim device: the local pool's statuses
for one faulty plan (stored through run_items as they finish), a crash contained to its item, a
hang cut off as TIMEOUT.

Ray starts once for the module (it is slow to start). The local pool's statuses are EXPECTED:
tests/conformance/test_engine.py runs a crash and a hang through it, test_engine_ray_cluster.py a
scale fault, a raise and an unsupported op (compared item by item with Ray's), test_opinfo.py a
fallback op; running this plan through the pool here too proved nothing more, at a 5 s hang.
"""

from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'neuron-check[ray]'")

from conformance.engine.config import RunConfig  # noqa: E402
from conformance.engine.local import run_items  # noqa: E402
from conformance.engine.ray import RayExecutor  # noqa: E402
from conformance.engine.ray_connect import join  # noqa: E402
from conformance.planning import OpsOptions  # noqa: E402
from conformance.suite import plan as plan_command  # noqa: E402
from op_db.errors import InputError  # noqa: E402
from op_db.records import Status  # noqa: E402
from op_db.store import Store  # noqa: E402

HANG_LIMIT_S = 5.0
# One item per outcome the engine must carry across: the sim profile injects each fault.
FAULTS = {
    "name": "ray-executor-test",
    "unsupported_ops": ["aten.cumprod.default"],
    "fallback_ops": ["aten.median.default"],
    "faults": [
        {"op": "aten.mul.Tensor", "kind": "scale", "value": 1.5},
        {"op": "aten.tanh.default", "kind": "raise", "value": "tanh is broken on this device"},
        {"op": "aten.atan2.default", "kind": "crash"},
        {"op": "aten.erfinv.default", "kind": "hang"},
    ],
}
EXPECTED = {
    "abs": Status.PASS, "add": Status.PASS, "mul": Status.MISMATCH, "cumprod": Status.UNSUPPORTED,
    "median": Status.FALLBACK, "tanh": Status.ERROR, "atan2": Status.CRASH, "erfinv": Status.TIMEOUT,
}


@pytest.fixture(scope="module")
def ray_instance(ray_head, ray_nodes):
    """Ray with 2 CPUs, quiet and on loopback, for the whole module, this process its driver: a
    2-CPU node on the session's head (tests/conformance/conftest.py; its start is most of a
    Ray start), which the executor finds initialised and uses as it is."""
    ray_nodes.add(num_cpus=2)
    ray_head.wait_for_nodes()
    join(ray, ray_head.address, "127.0.0.1")  # as the executor joins a loopback cluster
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def fault_runs(ray_instance, tmp_path_factory):
    """The faulty plan run by the Ray executor through run_items into a store:
    {"ray": {op name: Result}}, plus "ray-run", the stored run row of the Ray run."""
    folder = tmp_path_factory.mktemp("ray")
    profile = folder / "faults.json"
    profile.write_text(json.dumps(FAULTS))
    items = plan_command("ops", OpsOptions(ops=tuple(EXPECTED), dtypes=("float32",)))
    assert {item.subject for item in items} == set(EXPECTED)
    with Store.open(folder / "runs.db") as store:
        config = RunConfig(backend="sim", device="sim", jobs=2, timeout_s=HANG_LIMIT_S, suite_options=OpsOptions(max_samples=2),
                           sim_profile=str(profile), executor="ray")
        run_id = store.create_run(backend="sim", device="sim", options={"executor": "ray"})
        summary = run_items(items, config, store, run_id, progress=False)
        results = store.results(run_id)
        assert summary.done == len(results) == len(items), "one stored result per item"
        return {"ray": {r.subject: r for r in results}, "ray-run": store.run(run_id)}

def test_ray_gives_the_local_statuses(fault_runs):
    assert {op: r.status for op, r in fault_runs["ray"].items()} == EXPECTED
    assert fault_runs["ray-run"]["status"] == "finished"


def test_crash_is_contained_to_its_item(fault_runs):
    crashed = fault_runs["ray"]["atan2"]
    assert crashed.status is Status.CRASH
    assert "Ray actor died" in crashed.message
    # The items after the crash ran on a live actor and kept their own outcomes.
    assert fault_runs["ray"]["tanh"].message.endswith("tanh is broken on this device")
    assert sum(r.status is Status.CRASH for r in fault_runs["ray"].values()) == 1


def test_hang_becomes_timeout(fault_runs):
    hung = fault_runs["ray"]["erfinv"]
    assert hung.status is Status.TIMEOUT
    assert f"{HANG_LIMIT_S:g} s limit" in hung.message
    assert hung.duration_s >= HANG_LIMIT_S


def test_cluster_without_the_device_resource_is_refused(ray_instance):
    items = plan_command("ops", OpsOptions(ops=("abs",), dtypes=("float32",)))
    config = RunConfig(backend="neuron", device="neuron", executor="ray")
    with pytest.raises(InputError, match="neuron_cores"):
        RayExecutor().execute(items, config, lambda result: None)
