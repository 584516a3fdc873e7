"""The node-loss case of benchmarks/chaos.py: an ops sweep on a loopback Ray cluster whose nodes
are SIGKILLed mid-run.

    python benchmarks/chaos.py --node-loss                  3 nodes, 3 node kills, 40 ops x fp32
    python benchmarks/chaos.py --node-loss --nodes 4 --node-kills 6 --seed 2

A cluster of ray.cluster_utils on this host, every node at 127.0.0.1: a head that only hosts the
driver (no CPU) and --nodes one-CPU nodes. The sweep runs through the Ray executor in this
process (--jobs = --nodes actors), storing each result as `neuron-check ops` does, while a
thread SIGKILLs a random node (all its processes at once, as when a host dies; never the last
one) at random moments after results start to flow, --node-kills times, and a fresh node takes
the place of each. A sim
profile slows every device op by --op-delay seconds, so items last as on a real device and a
kill lands mid-item. First the same sweep runs through the local pool: the reference. Printed:

- lost (planned, no result), duplicated (a result emitted more than once for one item) and
  orphaned (actor processes of the run alive 5 s after it ended): all must be 0;
- items rerun after a node loss, and items whose status differs from the local run (must be 0:
  a lost node is not the backend's CRASH);
- the wall time against the local run.
Exits 1 when a must-be-0 figure is not 0. Linux only (reads /proc); needs the ray extra.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import tempfile
import threading
import time
from pathlib import Path

LOOPBACK = "127.0.0.1"
GONE_WITHIN_S = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("node loss (--node-loss)")
    group.add_argument("--node-loss", action="store_true", help="the Ray node-loss case instead of SIGKILLed runs")
    group.add_argument("--nodes", type=int, default=3, help="one-CPU nodes of the cluster (and actors)")
    group.add_argument("--node-kills", type=int, default=3)
    group.add_argument("--op-delay", type=float, default=0.03, help="seconds added to every sim device op")


class NodeKiller(threading.Thread):
    """SIGKILLs a random node of `cluster` (never the last one) at random moments once `flowing`
    is set, `kills` times or until `done` is set. Ray starts a node only from the main thread,
    so the replacements are left to `replace`, which the driver's result callback calls."""

    def __init__(self, cluster, kills: int, rng: random.Random, flowing: threading.Event, done: threading.Event):
        super().__init__(daemon=True)
        self.cluster, self.kills, self.rng, self.flowing, self.done = cluster, kills, rng, flowing, done
        self.killed: list[str] = []
        self.owed = 0  # nodes killed and not yet replaced
        self.lock = threading.Lock()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.flowing.wait()
            while len(self.killed) < self.kills and not self.done.wait(self.rng.uniform(0.2, 1.5)):
                with self.lock:
                    nodes = sorted(self.cluster.worker_nodes, key=lambda node: node.node_id)
                    if len(nodes) < 2:
                        continue
                    victim = self.rng.choice(nodes)
                    self.cluster.remove_node(victim, allow_graceful=False)
                    self.killed.append(victim.node_id[:8])
                    self.owed += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc

    def replace(self) -> None:
        """Start a fresh node for each one killed (main thread only)."""
        with self.lock:
            while self.owed:
                self.cluster.add_node(node_ip_address=LOOPBACK, num_cpus=1)
                self.owed -= 1


def actor_processes() -> set:
    """This process's descendants that are Ray actors of the engine (DeviceActor)."""
    from conformance.engine import proctree

    found = set()
    for proc in proctree.descendants(os.getpid()):
        try:
            if b"DeviceActor" in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                found.add(proc)
        except OSError:
            continue
    return found


def orphans_after(deadline_s: float) -> int:
    """How many engine actors are still alive `deadline_s` from now."""
    from conformance.engine import proctree

    end = time.monotonic() + deadline_s
    left = actor_processes()
    while proctree.alive(left) and time.monotonic() < end:
        time.sleep(0.1)
    return len(proctree.alive(actor_processes()))


def node_loss(args: argparse.Namespace) -> int:
    from ray.cluster_utils import Cluster

    from conformance.engine.config import RunConfig
    from conformance.engine.local import run_items
    from conformance.engine.local import LocalExecutor
    from conformance.engine.ray import RayExecutor
    from conformance.planning import OpsOptions, parse_dtypes
    from conformance.suite import plan
    from op_db.store import Store
    from porting_cli.cli.options import split_list

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_memory_monitor_refresh_ms"] = "0"  # a shared machine's memory is not the subject
    options = OpsOptions(ops=tuple(split_list(args.ops)), dtypes=tuple(parse_dtypes(split_list(args.dtype))),
                         grad=args.grad, max_samples=args.max_samples)
    items = plan("ops", options)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="neuron-check-chaos-nodes-") as tmp:
        profile = Path(tmp) / "slow.json"
        profile.write_text(json.dumps({"name": "slow device", "faults": [
            {"op": "aten.*", "kind": "delay", "value": args.op_delay}]}))
        config = RunConfig(backend="sim", device="sim", jobs=args.nodes, timeout_s=120.0, sim_profile=str(profile),
                           suite_options=options)
        started = time.perf_counter()
        reference: dict = {}
        LocalExecutor().execute(items, config, lambda r: reference.__setitem__(r.item, r.status))
        reference_wall = time.perf_counter() - started

        cluster = Cluster(initialize_head=True, head_node_args={"node_ip_address": LOOPBACK, "num_cpus": 0,
                                                                "include_dashboard": False})
        try:
            for _ in range(args.nodes):
                cluster.add_node(node_ip_address=LOOPBACK, num_cpus=1)
            cluster.wait_for_nodes()
            emitted: collections.Counter = collections.Counter()
            statuses: dict = {}
            rerun = 0
            flowing, done = threading.Event(), threading.Event()
            killer = NodeKiller(cluster, args.node_kills, rng, flowing, done)

            def watch(result) -> None:
                nonlocal rerun
                emitted[result.item] += 1
                statuses[result.item] = result.status
                rerun += bool(result.extra.get("rerun_after_node_loss"))
                flowing.set()
                killer.replace()

            executor = RayExecutor()
            execute = executor.execute
            executor.execute = lambda items_, config_, emit: execute(items_, config_, lambda r: (emit(r), watch(r)))
            ray_config = config.with_(executor="ray", ray_address=cluster.address, ray_connect_timeout_s=120.0)
            killer.start()
            started = time.perf_counter()
            with Store.open(Path(tmp) / "chaos-nodes.db") as store:
                run_id = store.create_run(backend="sim", device="sim", options={})
                summary = run_items(items, ray_config, store, run_id, progress=False, executor=executor)
                stored = {r.item for r in store.results(run_id)}
            wall = time.perf_counter() - started
            done.set()
            killer.join()
            orphaned = orphans_after(GONE_WITHIN_S)
        finally:
            cluster.shutdown()
    if killer.error is not None:
        raise killer.error
    lost = len(set(items) - set(emitted)) + len(set(items) - stored)
    duplicated = sum(count - 1 for count in emitted.values() if count > 1)
    differs = sum(1 for item, status in statuses.items() if reference.get(item) != status)
    print(f"plan: {len(items)} items ({len(split_list(args.ops))} ops x {args.dtype}), {args.nodes} nodes "
          f"(-j {args.nodes}), +{args.op_delay:g} s per device op, seed {args.seed}")
    print(f"local run (the reference): {len(reference)} items in {reference_wall:.1f} s")
    print(f"node-loss run: {len(killer.killed)} node SIGKILLs (each replaced by a fresh node), "
          f"{'interrupted: ' + summary.stopped if summary.interrupted else 'finished'}, {wall:.1f} s")
    print(f"items lost: {lost}")
    print(f"items duplicated: {duplicated}")
    print(f"actor processes orphaned: {orphaned}")
    print(f"items rerun after a node loss: {rerun}")
    print(f"items whose status differs from the local run: {differs}")
    print(f"wall-time: {wall / reference_wall:.2f}x the local run (cluster and actor start-up included)")
    return 1 if lost or duplicated or orphaned or differs or summary.interrupted else 0
