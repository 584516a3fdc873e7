"""The Ray executor on a loopback cluster of several nodes (ray.cluster_utils, every node at
127.0.0.1): the driver joins it by address, a node killed mid-run loses no result and counts
none twice (its items rerun on the surviving node, with the statuses of a local run, and an
item that crashes its own process on a healthy node is still CRASH), and a run whose last node
goes stops as interrupted and is finished by a resume on a node that joined later.

One cluster for the module: a head that only hosts the driver (no CPU, so no actor runs there)
and two one-CPU nodes. Every process of it is stopped when the module ends, pass or fail.
"""

from __future__ import annotations

import json
import threading

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'neuron-check[ray]'")
from ray.cluster_utils import Cluster  # noqa: E402

from conformance.config import RunConfig  # noqa: E402
from conformance.engine import RunSummary, run_items  # noqa: E402
from conformance.engine.local import LocalExecutor  # noqa: E402
from conformance.engine.ray import RayExecutor  # noqa: E402
from conformance.planning import OpsOptions  # noqa: E402
from conformance.suite import plan as plan_command  # noqa: E402
from op_db.records import Result, Status  # noqa: E402
from op_db.store import Store  # noqa: E402

pytestmark = pytest.mark.slow

LOOPBACK = "127.0.0.1"
# Every item is slowed to about half a second, so a node killed just after its first result
# dies in the middle of its next item.
SLOW = 0.5
PROFILE = {
    "name": "ray-cluster-test",
    "unsupported_ops": ["aten.cumprod.default"],
    "faults": [
        {"op": "aten.mul.Tensor", "kind": "scale", "value": 1.5},
        {"op": "aten.tanh.default", "kind": "raise", "value": "tanh is broken on this device"},
        {"op": "aten.atan2.default", "kind": "crash"},
        *({"op": op, "kind": "delay", "value": SLOW} for op in (
            "aten.abs.default", "aten.add.Tensor", "aten.mul.Tensor", "aten.sin.default", "aten.cos.default",
            "aten.exp.default", "aten.neg.default")),
    ],
}
OPS = ("abs", "add", "mul", "cumprod", "tanh", "atan2", "sin", "cos", "exp", "neg")
KILL_AFTER_S = 0.2


@pytest.fixture(scope="module")
def cluster():
    """Head (driver only) + nodes "a" and "b", all at 127.0.0.1; torn down whatever happens."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        made = Cluster(initialize_head=True, head_node_args={"node_ip_address": LOOPBACK, "num_cpus": 0,
                                                              "include_dashboard": False})
        try:
            made.named = {name: made.add_node(node_ip_address=LOOPBACK, num_cpus=1) for name in ("a", "b")}
            made.wait_for_nodes()
            yield made
        finally:
            if ray.is_initialized():
                ray.shutdown()
            made.shutdown()


@pytest.fixture(scope="module")
def plan_and_profile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cluster")
    profile = folder / "faults.json"
    profile.write_text(json.dumps(PROFILE))
    items = plan_command("ops", OpsOptions(ops=OPS, dtypes=("float32",)))
    assert {item.subject for item in items} == set(OPS)
    return items, str(profile), folder


def _config(profile: str, **fields) -> RunConfig:
    settings = {"jobs": 2, "timeout_s": 60.0, **fields}
    return RunConfig(backend="sim", device="sim", sim_profile=profile, suite_options=OpsOptions(max_samples=2),
                     **settings)


@pytest.fixture(scope="module")
def local_statuses(plan_and_profile):
    """What a local run of the plan gives, item by item: the reference."""
    items, profile, _ = plan_and_profile
    results: list[Result] = []
    LocalExecutor().execute(items, _config(profile, jobs=1), results.append)
    return {r.item: r.status for r in results}


def _on(node) -> str:
    """The start of Result.node for an item that ran on `node`."""
    return f"{LOOPBACK}/{node.node_id[:8]}"


class _NodeKiller:
    """Watches the stored results and kills `victim` KILL_AFTER_S after its first one, while
    it runs its next item: SIGKILL, as a host dies, or `graceful` (SIGTERM first, as `ray stop`)."""

    def __init__(self, cluster: Cluster, victim, graceful: bool = False):
        self.cluster, self.victim, self.graceful = cluster, victim, graceful
        self.seen: list[Result] = []
        self.timer: threading.Timer | None = None

    def __call__(self, result: Result) -> None:
        self.seen.append(result)
        if self.timer is None and (result.node or "").startswith(_on(self.victim)):
            self.timer = threading.Timer(KILL_AFTER_S, self.cluster.remove_node, (self.victim, self.graceful))
            self.timer.start()

    def join(self) -> None:
        if self.timer is not None:
            self.timer.join()


def _run(items, config, store: Store, run_id: int, watch) -> RunSummary:
    """run_items (which stores each result) with `watch` seeing each result after it is stored."""
    executor = RayExecutor()
    execute = executor.execute
    executor.execute = lambda items_, config_, emit: execute(items_, config_, lambda r: (emit(r), watch(r)))
    return run_items(items, config, store, run_id, progress=False, executor=executor)


def _run_killing(items, config, store: Store, killer: _NodeKiller) -> tuple[int, RunSummary]:
    """A new run of `items` into `store` while `killer` watches; (run id, summary)."""
    run_id = store.create_run(backend="sim", device="sim", options={})
    try:
        return run_id, _run(items, config, store, run_id, killer)
    finally:
        killer.join()


def _cluster_config(cluster: Cluster, profile: str) -> RunConfig:
    return _config(profile, executor="ray", ray_address=cluster.address, ray_connect_timeout_s=60.0)


def test_a_killed_node_loses_nothing_and_its_items_rerun_elsewhere(cluster, plan_and_profile, local_statuses):
    items, profile, folder = plan_and_profile
    victim, survivor = cluster.named["b"], cluster.named["a"]
    killer = _NodeKiller(cluster, victim)
    with Store.open(folder / "node-loss.db") as store:
        run_id, summary = _run_killing(items, _cluster_config(cluster, profile), store, killer)
        stored = store.results(run_id)
        run = store.run(run_id)
    assert killer.timer is not None, "node b never ran an item: the test proved nothing"
    assert not summary.interrupted and run["status"] == "finished"
    # Every planned item has exactly one result: none lost, none emitted twice.
    assert sorted(r.item for r in killer.seen) == sorted(items)
    assert len(stored) == len(items) and {r.item for r in stored} == set(items)
    # Statuses equal the local run's, item by item: CRASH only for the item that crashed its own
    # process on a healthy node, none for the items the dead node held.
    assert {r.item: r.status for r in stored} == local_statuses
    assert local_statuses[next(i for i in items if i.subject == "atan2")] is Status.CRASH
    # The item b held when it died ran again on a, and says so.
    rerun = [r for r in stored if r.extra.get("rerun_after_node_loss")]
    assert rerun, "no item was in flight on the killed node"
    for result in rerun:
        assert result.extra["rerun_after_node_loss"] == [_on(victim)]
        assert result.node.startswith(_on(survivor))
    assert {r.node.split(" ")[0] for r in stored} <= {_on(victim), _on(survivor)}
    assert not ray.is_initialized()  # the executor let go of the cluster it joined


def test_a_run_whose_last_node_dies_stops_and_resumes_on_a_new_one(cluster, plan_and_profile, local_statuses):
    items, profile, folder = plan_and_profile
    last = cluster.named["a"]
    if last not in cluster.worker_nodes:
        pytest.skip("node a is gone: the node-loss test above failed")
    killer = _NodeKiller(cluster, last, graceful=True)
    config = _cluster_config(cluster, profile)
    with Store.open(folder / "all-gone.db") as store:
        run_id, summary = _run_killing(items, config, store, killer)
        assert summary.interrupted and "no node of the Ray cluster is left" in summary.stopped
        assert store.run(run_id)["status"] == "interrupted"
        done = store.stored_items(run_id)
        assert 1 <= len(done) < len(items)
        cluster.named["c"] = cluster.add_node(node_ip_address=LOOPBACK, num_cpus=1)
        left = [item for item in items if item not in done]
        again = _run(left, config, store, run_id, lambda result: None)
        stored = store.results(run_id)
    assert not again.interrupted and again.done == len(left)
    assert len(stored) == len(items) and {r.item: r.status for r in stored} == local_statuses
    assert all(r.node.startswith(_on(cluster.named["c"])) for r in stored if r.item in left)
