"""Joining a Ray cluster and judging a lost actor, without a cluster: an address where nothing
listens or that never admits the driver ends within --ray-connect-timeout in one sentence (exit
2) with no run recorded; `auto` without a cluster says what to do in our own flag's name; a
loopback cluster gets a loopback driver; a failed call counts as node loss only when Ray says
so or the node's raylet is gone (tests/conformance/test_engine_ray_cluster.py kills real nodes)."""

from __future__ import annotations

import socket
import time

import pytest
from click.testing import CliRunner

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'neuron-check[ray]'")
from ray.exceptions import ActorDiedError, ActorUnavailableError, NodeDiedError  # noqa: E402

from conformance.engine import ray_connect  # noqa: E402
from conformance.engine.ray_nodes import NodeWatch, Placement  # noqa: E402
from op_db.errors import InputError  # noqa: E402
from op_db.store import Store  # noqa: E402
from porting_cli.cli.app import main  # noqa: E402

LIMIT_S = 3.0
# What a join may take beyond the limit: killing the probe and reading its pipe.
SLACK_S = 1.5


@pytest.fixture
def closed_port() -> int:
    """A loopback port where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def silent_listener():
    """A loopback port that accepts connections and never says a word (not a Ray GCS)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


def _ops(db, *flags: str):
    return CliRunner().invoke(main, ["ops", "--device", "sim", "--ops", "abs", "--dtype", "fp32", "--db", str(db),
                                     *flags])


def test_nothing_listening_is_exit_2_and_no_run(closed_port, tmp_path):
    db = tmp_path / "runs.db"
    with Store.open(db) as store:  # a store with history: the failed join must add nothing to it
        store.create_run(backend="sim", device="sim", options={})
    address = f"127.0.0.1:{closed_port}"
    outcome = _ops(db, "--ray-address", address, "--ray-connect-timeout", str(LIMIT_S))
    assert outcome.exit_code == 2, outcome.output
    message = outcome.output.strip().splitlines()
    assert len(message) == 1 and address in message[0] and "nothing listens there" in message[0]
    with Store.open(db, readonly=True) as store:
        assert len(store.runs()) == 1


def test_an_address_that_never_admits_is_cut_at_the_limit(silent_listener, tmp_path):
    address = f"127.0.0.1:{silent_listener}"
    started = time.monotonic()
    with pytest.raises(InputError, match=f"cannot join the Ray cluster at {address} within {LIMIT_S:g} s") as caught:
        ray_connect.RaySession().open(address, LIMIT_S, cpus=1)
    assert time.monotonic() - started < LIMIT_S + SLACK_S
    assert "--ray-connect-timeout" in str(caught.value)
    assert not ray.is_initialized()
    outcome = _ops(tmp_path / "new.db", "--ray-address", address, "--ray-connect-timeout", str(LIMIT_S))
    assert outcome.exit_code == 2 and "never admits this driver" in outcome.output
    assert not (tmp_path / "new.db").exists()  # checked before the database is touched


def test_auto_without_a_cluster_names_our_flag(monkeypatch, tmp_path):
    from ray._private import services

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(services, "find_bootstrap_address", lambda temp_dir: None)
    monkeypatch.setattr(services, "find_gcs_addresses", lambda: [])
    monkeypatch.setattr(services.find_gcs_addresses, "cache_clear", lambda: None, raising=False)
    outcome = _ops(tmp_path / "auto.db", "--ray-address", "auto")
    assert outcome.exit_code == 2
    assert "--ray-address auto found no Ray cluster" in outcome.output and "`--address`" not in outcome.output
    assert not (tmp_path / "auto.db").exists()


def test_timeout_without_an_address_is_a_usage_error(tmp_path):
    outcome = _ops(tmp_path / "t.db", "--executor", "ray", "--ray-connect-timeout", "5")
    assert outcome.exit_code == 2 and "--ray-connect-timeout applies only with --ray-address" in outcome.output


@pytest.mark.parametrize(("address", "node_ip"), [
    ("127.0.0.1:6379", "127.0.0.1"), ("localhost:6379", "127.0.0.1"), ("[::1]:6379", "127.0.0.1"),
    ("ray://127.0.0.1:10001", "127.0.0.1"), ("10.0.0.5:6379", None), ("head.example:6379", None),
])
def test_the_driver_node_follows_the_cluster_address(address, node_ip):
    assert ray_connect.driver_node_ip(address) == node_ip


@pytest.mark.parametrize("address", ["6379", "host:", ":6379", "host:port", "host:70000"])
def test_malformed_address_is_one_sentence(address):
    with pytest.raises(InputError, match="is not HOST:PORT"):
        ray_connect.split_address(address)


class _NodeTable:
    """Stands in for the `ray` module where NodeWatch reads the node table."""

    def __init__(self, nodes: list[dict]):
        self.entries = nodes

    def nodes(self) -> list[dict]:
        return self.entries


def _node(node_id: str, port: int, alive: bool = True) -> dict:
    return {"NodeID": node_id, "Alive": alive, "NodeManagerAddress": "127.0.0.1", "NodeManagerPort": port,
            "Resources": {"CPU": 2.0}}


def test_a_crash_on_a_live_node_is_not_node_loss(silent_listener):
    watch = NodeWatch(_NodeTable([_node("a" * 56, silent_listener)]))
    place = Placement("a" * 56, "127.0.0.1")
    assert not watch.lost(place, ActorDiedError())  # the worker process died; its raylet answers
    assert watch.capacity({"CPU": 1}) == 2


def test_node_loss_is_what_ray_says_or_a_gone_raylet(silent_listener, closed_port):
    place = Placement("a" * 56, "127.0.0.1")
    table = _NodeTable([_node("a" * 56, silent_listener)])
    assert NodeWatch(table).lost(place, NodeDiedError("node gone"))
    said = ActorDiedError()
    said.error_msg = "The actor died because its node has died. Node Id: aaaa"
    assert NodeWatch(table).lost(place, said)
    # Killed outright: Ray still lists the node alive, but its raylet refuses connections.
    refused = NodeWatch(_NodeTable([_node("a" * 56, closed_port)]))
    assert refused.lost(place, ActorUnavailableError("RpcError: Socket closed", None))
    # Marked dead, or gone from the table.
    assert NodeWatch(_NodeTable([_node("a" * 56, silent_listener, alive=False)])).lost(place, ActorDiedError())
    assert NodeWatch(_NodeTable([])).lost(place, ActorDiedError())
    assert NodeWatch(_NodeTable([])).capacity({"CPU": 1}) == 0
