"""Nodes of a Ray cluster as the executors see them: where an actor runs, whether a failed call
means its node died, and how many actors the surviving nodes still hold.

A call on an actor fails the same way (RayActorError) whether the item killed its own process
or the host under it died; only the first is the backend's fault (CRASH). The node is judged
lost when Ray says so (the error names the node's death, or its node is no longer alive in the
cluster's node table), or when the node's raylet no longer accepts a connection: a node killed
outright is marked dead by Ray only after its health checks fail, seconds to a minute later,
while its raylet port refuses at once. A healthy node's raylet answers, so an item that
crashed its process there stays CRASH.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from typing import Any

# Ray's words when an actor or object went with its node (ray.exceptions, GCS death causes).
NODE_DEATH_WORDS = ("its node has died", "node has died", "node was terminated", "raylet died", "node died")
# How long the raylet of an actor's node may take to accept a connection before the node counts as lost.
RAYLET_PROBE_S = 3.0
# How often the driver reads the cluster's node table while it has no live actor.
NODE_TABLE_EVERY_S = 1.0


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one actor runs: its node and the devices Ray pinned for it."""

    node_id: str
    ip: str
    devices: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """'IP/node' (first 8 hex digits of Ray's node id: loopback nodes share an IP), plus the
        devices Ray pinned to the actor, e.g. '10.0.0.7/5c076a46 GPU 3'."""
        text = f"{self.ip}/{self.node_id[:8]}"
        return f"{text} {' '.join(self.devices)}" if self.devices else text


def here() -> Placement:
    """The placement of the calling actor (runs inside it)."""
    import ray

    context = ray.get_runtime_context()
    devices = tuple(f"{kind} {','.join(ids)}" for kind, ids in sorted(context.get_accelerator_ids().items()) if ids)
    return Placement(context.get_node_id(), ray.util.get_node_ip_address(), devices)


def says_node_died(exc: BaseException) -> bool:
    """Does this Ray error say that a node (not a worker process) is gone?"""
    from ray.exceptions import LocalRayletDiedError, NodeDiedError, ObjectLostError

    if isinstance(exc, (NodeDiedError, LocalRayletDiedError, ObjectLostError)):
        return True  # an object is lost only with the node that held it
    text = str(exc).lower()
    return any(words in text for words in NODE_DEATH_WORDS)


class NodeWatch:
    """The driver's view of the cluster's nodes, read from Ray's node table."""

    def __init__(self, ray: Any) -> None:
        self.ray = ray
        self.read_at = 0.0
        self.alive: dict[str, dict[str, Any]] = {}

    def refresh(self) -> dict[str, dict[str, Any]]:
        """Node id -> node table entry, for the nodes Ray counts alive."""
        self.alive = {node["NodeID"]: node for node in self.ray.nodes() if node.get("Alive")}
        self.read_at = time.monotonic()
        return self.alive

    def lost(self, placement: Placement | None, exc: BaseException) -> bool:
        """Did the call that raised `exc` fail because the node under its actor is gone?"""
        if says_node_died(exc):
            return True
        if placement is None:
            return False  # the actor never said where it runs: nothing to judge by
        node = self.refresh().get(placement.node_id)
        return node is None or not raylet_answers(node)

    def capacity(self, resources: dict[str, float]) -> int:
        """How many actors of `resources` the live nodes hold in all (each actor on one node)."""
        if time.monotonic() - self.read_at >= NODE_TABLE_EVERY_S:
            self.refresh()
        return sum(node_capacity(node.get("Resources", {}), resources) for node in self.alive.values())


def node_capacity(node_resources: dict[str, float], resources: dict[str, float]) -> int:
    limits = [int(node_resources.get(name, 0) // amount) for name, amount in resources.items() if amount > 0]
    return min(limits) if limits else 0


def raylet_answers(node: dict[str, Any], timeout_s: float = RAYLET_PROBE_S) -> bool:
    """Does the node's raylet accept a TCP connection? (No port known: assume it does.)"""
    host, port = node.get("NodeManagerAddress"), node.get("NodeManagerPort")
    if not host or not port:
        return True
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False
