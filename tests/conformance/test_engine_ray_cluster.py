"""The Ray executor on a loopback cluster of several nodes (ray.cluster_utils, every node at
127.0.0.1): the driver joins it by address; a node killed mid-run loses no result and counts
none twice (its item reruns on the surviving node, and every status is a local run's); a run
whose last node goes stops as interrupted and is finished by a resume on a node that joined
later; a dist world whose node dies is rerun whole. (A crash on a healthy node stays CRASH:
test_engine_ray.py, test_engine_ray_connect.py.) The tests run in order, on one cluster.

One cluster: the session's head that only hosts the driver (no CPU, so no actor runs there;
tests/conformance/conftest.py, shared with test_engine_ray.py) and this module's one- and
two-CPU nodes, removed when the module ends, pass or fail. Slow (a minute or more): Ray nodes
and actors that import torch start several times.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'neuron-check[ray]'")

from conformance.engine.config import RunConfig  # noqa: E402
from conformance.engine.local import RunSummary, run_items  # noqa: E402
from conformance.engine.ray import RayExecutor  # noqa: E402
from conformance.planning import OpsOptions  # noqa: E402
from conformance.suite import plan as plan_command  # noqa: E402
from op_db.records import Result  # noqa: E402
from op_db.store import Store  # noqa: E402

pytestmark = pytest.mark.slow

LOOPBACK = "127.0.0.1"
# Every item is slowed to about half a second, so a node killed just after its first result
# dies in the middle of its next item.
SLOW = 0.3
PROFILE = {
    "name": "ray-cluster-test",
    "unsupported_ops": ["aten.cumprod.default"],
    "faults": [
        {"op": "aten.mul.Tensor", "kind": "scale", "value": 1.5},
        {"op": "aten.tanh.default", "kind": "raise", "value": "tanh is broken on this device"},
        *({"op": op, "kind": "delay", "value": SLOW} for op in (
            "aten.abs.default", "aten.add.Tensor", "aten.mul.Tensor", "aten.sin.default", "aten.cos.default",
            "aten.exp.default", "aten.neg.default", "aten.sub.Tensor", "aten.sqrt.default", "aten.floor.default")),
    ],
}
OPS = ("abs", "add", "mul", "cumprod", "tanh", "sin", "cos", "exp", "neg", "sub", "sqrt", "floor")
KILL_AFTER_S = 0.2


class ModuleCluster:
    """The shared head (driver only) as this module uses it: the nodes it adds (all at
    127.0.0.1, through ray_nodes, so they are removed when the module ends), by name in `named`."""

    def __init__(self, head, nodes) -> None:
        self.head, self.nodes, self.named = head, nodes, {}

    @property
    def address(self) -> str:
        return self.head.address

    @property
    def worker_nodes(self) -> list:
        return self.head.worker_nodes

    def add_node(self, **node_args):
        return self.nodes.add(**node_args)

    def remove_node(self, node, allow_graceful: bool = True) -> None:
        self.head.remove_node(node, allow_graceful)


@pytest.fixture(scope="module")
def cluster(ray_head, ray_nodes):
    """The session's head (driver only) + nodes "a" and "b"; the driver let go whatever happens."""
    made = ModuleCluster(ray_head, ray_nodes)
    try:
        made.named = {name: made.add_node(num_cpus=1) for name in ("a", "b")}
        ray_head.wait_for_nodes()
        yield made
    finally:
        if ray.is_initialized():
            ray.shutdown()


@pytest.fixture(scope="module")
def plan_and_profile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cluster")
    profile = folder / "faults.json"
    profile.write_text(json.dumps(PROFILE))
    items = plan_command("ops", OpsOptions(ops=OPS, dtypes=("float32",)))
    assert {item.subject for item in items} == set(OPS)
    return items, str(profile), folder


@pytest.fixture(scope="module")
def local_run(plan_and_profile):
    """`neuron-check ops` of the plan with the local pool, started at once (it runs while the
    cluster starts) and read when asked: the reference, item by item."""
    _, profile, folder = plan_and_profile
    db = folder / "local.db"
    command = [sys.executable, "-m", "porting_cli", "ops", "--device", "sim", "--ops", ",".join(OPS), "--dtype", "fp32",
               "--max-samples", "2", "--sim-profile", profile, "--db", str(db), "--jobs", "2"]
    child = subprocess.Popen(command, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    found: dict = {}

    def statuses() -> dict:
        if not found:
            _, stderr = child.communicate(timeout=600)
            assert child.returncode == 0, stderr
            with Store.open(db, readonly=True) as store:
                found.update({r.item: r.status for r in store.results(store.runs()[0]["id"])})
        return found

    try:
        yield statuses
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()


def _on(node) -> str:
    """The start of Result.node for an item that ran on `node`."""
    return f"{LOOPBACK}/{node.node_id[:8]}"


class _NodeKiller:
    """Watches the stored results and kills each node of `victims` in turn, KILL_AFTER_S after
    the first of its results that `when` accepts (and that came after the previous kill), so it
    dies in the middle of its next item. A victim given as (node, True, when) gets SIGTERM first,
    as `ray stop` does, so Ray marks it dead at once; otherwise SIGKILL, as when a host dies."""

    def __init__(self, cluster: ModuleCluster, victims: list):
        self.cluster, self.victims = cluster, list(victims)
        self.seen: list[Result] = []
        self.timers: list[threading.Timer] = []
        self.kills: list[tuple[str, int]] = []  # (node, results seen when its kill was set off)

    def __call__(self, result: Result) -> None:
        self.seen.append(result)
        if self.timers and self.timers[-1].is_alive():
            return  # the last kill has not landed yet
        if self.victims and (result.node or "").startswith(_on(self.victims[0][0])) and self.victims[0][2](result):
            node, graceful, _ = self.victims.pop(0)
            self.kills.append((_on(node), len(self.seen)))
            self.timers.append(threading.Timer(KILL_AFTER_S, self.cluster.remove_node, (node, graceful)))
            self.timers[-1].start()

    def join(self) -> None:
        for timer in self.timers:
            timer.join()


def _run(items, config, store: Store, run_id: int, watch) -> RunSummary:
    """run_items (which stores each result) with `watch` seeing each result after it is stored."""
    executor = RayExecutor()
    execute = executor.execute
    executor.execute = lambda items_, config_, emit: execute(items_, config_, lambda r: (emit(r), watch(r)))
    try:
        return run_items(items, config, store, run_id, progress=False, executor=executor)
    finally:
        if hasattr(watch, "join"):
            watch.join()


def _ray_config(cluster: ModuleCluster, profile: str) -> RunConfig:
    return RunConfig(backend="sim", device="sim", jobs=2, timeout_s=60.0, sim_profile=profile,
                     suite_options=OpsOptions(max_samples=2), executor="ray", ray_address=cluster.address,
                     ray_connect_timeout_s=60.0)


def test_a_node_killed_mid_item_loses_nothing_and_its_item_reruns_elsewhere(local_run, cluster, plan_and_profile):
    items, profile, folder = plan_and_profile
    a, b = cluster.named["a"], cluster.named["b"]
    killer = _NodeKiller(cluster, [(b, False, lambda result: True)])
    with Store.open(folder / "node-loss.db") as store:
        run_id = store.create_run(backend="sim", device="sim", options={})
        summary = _run(items, _ray_config(cluster, profile), store, run_id, killer)
        stored = store.results(run_id)
        status = store.run(run_id)["status"]
    assert killer.kills, "node b never ran an item: nothing proved"
    assert not summary.interrupted and status == "finished"
    # Every planned item has exactly one result: none lost, none emitted twice.
    assert sorted(r.item for r in killer.seen) == sorted(items)
    assert len(stored) == len(items) and {r.item for r in stored} == set(items)
    # Statuses equal the local run's, item by item: no CRASH for the item the dead node held.
    assert {r.item: r.status for r in stored} == local_run()
    # What b held when it died ran again on a, and says so.
    rerun = [r for r in stored if r.extra.get("rerun_after_node_loss")]
    assert rerun, f"no item was in flight on node b when it died: {[(r.subject, r.node) for r in killer.seen]}"
    assert all(r.extra["rerun_after_node_loss"] == [_on(b)] and r.node.startswith(_on(a)) for r in rerun)
    assert not ray.is_initialized()  # the executor let go of the cluster it joined


def test_a_run_whose_last_node_dies_stops_and_a_resume_finishes_it(local_run, cluster, plan_and_profile):
    items, profile, folder = plan_and_profile
    last = cluster.named["a"]
    if len(cluster.worker_nodes) != 1 or last not in cluster.worker_nodes:
        pytest.skip("the cluster is not down to node a: the test above failed")
    killer = _NodeKiller(cluster, [(last, True, lambda result: True)])
    config = _ray_config(cluster, profile)
    with Store.open(folder / "all-gone.db") as store:
        run_id = store.create_run(backend="sim", device="sim", options={})
        first = _run(items, config, store, run_id, killer)
        assert first.interrupted and "no node of the Ray cluster is left" in first.stopped, first
        assert store.run(run_id)["status"] == "interrupted"
        done = store.stored_items(run_id)
        assert len(done) == first.done == len(killer.seen) < len(items)

        # Two CPUs, so that the next test's worlds of 2 ranks can land on it too.
        cluster.named["c"] = c = cluster.add_node(num_cpus=2)
        left = [item for item in items if item not in done]
        resumed: list[Result] = []
        second = _run(left, config, store, run_id, resumed.append)
        stored = store.results(run_id)
    assert not second.interrupted and second.done == len(left)
    assert sorted(r.item for r in killer.seen + resumed) == sorted(items)
    assert len(stored) == len(items) and {r.item: r.status for r in stored} == local_run()
    assert all(r.node.startswith(_on(c)) for r in resumed)


def test_a_world_whose_node_dies_is_rerun_whole(cluster, tmp_path):
    """dist on Ray: a world of 2 ranks in one placement group on a 2-CPU node; that node is
    SIGKILLed in the middle of a collective, and the item reruns in a fresh world on the other."""
    from conformance.dist.plan import DistOptions
    from conformance.dist.ray_world import RayWorldExecutor
    from conformance.dist.world import WorldSpec
    from op_db.records import Status, WorkItem

    profile = tmp_path / "slow-collectives.json"
    profile.write_text(json.dumps({"collective_faults": [
        {"op": op, "kind": "delay", "value": 1.0} for op in ("all_reduce", "broadcast", "all_gather")]}))
    items = [WorkItem("dist", subject, "contig", "float32", "eager") for subject in ("all_reduce.sum", "broadcast",
                                                                                      "all_gather")]
    # Two 2-CPU nodes: c, which joined for the resume above, if it is up (a node's start takes
    # seconds), and new ones for the rest.
    hosts = [node for node in (cluster.named.get("c"),) if node is not None and node in cluster.worker_nodes]
    hosts += [cluster.add_node(num_cpus=2) for _ in range(2 - len(hosts))]
    killer = _NodeKiller(cluster, [])
    first_world = {}

    def watch(result: Result) -> None:
        if not first_world:  # whichever 2-CPU node the first world landed on is the one to kill
            first_world["node"] = next(host for host in hosts if result.node.startswith(_on(host)))
            killer.victims = [(first_world["node"], False, lambda r: True)]
        killer(result)

    config = RunConfig(backend="sim", device="sim", timeout_s=60.0, executor="ray", ray_address=cluster.address,
                       ray_connect_timeout_s=60.0, sim_profile=str(profile), suite_options=DistOptions(world_size=2))
    try:
        RayWorldExecutor(WorldSpec(2, ("sim", "sim"))).execute(items, config, watch)
    finally:
        killer.join()
    assert sorted(r.item for r in killer.seen) == sorted(items)
    assert {r.item: r.status for r in killer.seen} == {item: Status.PASS for item in items}
    dead = _on(first_world["node"])
    survivor = _on(next(host for host in hosts if host is not first_world["node"]))
    rerun = [r for r in killer.seen if r.extra.get("rerun_after_node_loss")]
    assert rerun, "no item was in flight in the world on the killed node"
    for result in rerun:  # the whole world moved: every rank of the fresh one on the survivor
        assert result.extra["rerun_after_node_loss"] == [dead]
        assert result.node == survivor
    assert not ray.is_initialized()
