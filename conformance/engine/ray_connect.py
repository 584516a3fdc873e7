"""Joining a Ray cluster (--ray-address), or starting a private local instance, within a time limit.

Three things go wrong when a driver joins a cluster, and each gets one sentence (InputError,
exit 2) before any run is recorded:

- nothing listens at the address (no cluster, a wrong port or host);
- something answers but the driver is never admitted (not a Ray GCS port, this host is not a
  node of the cluster, a firewall in between), which Ray itself retries without end: so the
  join is first tried in a child process that is killed at --ray-connect-timeout;
- `auto` finds no cluster this host joined.

A loopback cluster (every node at 127.0.0.1, as `ray start --node-ip-address 127.0.0.1` or
ray.cluster_utils make it) gets a loopback driver: Ray rewrites a loopback address into this
host's interface address, where such a cluster does not listen, unless it is told that this is
a single-host cluster, which is what `_loopback_node` does for the length of the join.

Ray is imported only inside functions: this module is imported by the CLI's option checks.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from op_db.errors import InputError

DEFAULT_CONNECT_TIMEOUT_S = 30.0
LOOPBACK = "127.0.0.1"
CLIENT_SCHEME = "ray://"
QUIET = {"log_to_driver": False, "logging_level": logging.ERROR, "namespace": "neuron-check"}
# A probe that has not joined this long before the deadline is killed (its ending takes a moment).
KILL_MARGIN_S = 0.5
# The probe child prints this line once it has joined.
JOINED = "joined"


def split_address(address: str) -> tuple[str, int]:
    """'HOST:PORT' (or 'ray://HOST:PORT', '[::1]:PORT') -> (host, port); InputError when malformed."""
    text = address[len(CLIENT_SCHEME):] if address.startswith(CLIENT_SCHEME) else address
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--ray-address {address!r} is not HOST:PORT, ray://HOST:PORT or 'auto'.")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def driver_node_ip(address: str) -> str | None:
    """The node address this driver takes in the cluster at `address`: loopback for a loopback
    cluster; otherwise None, and Ray picks the node of the cluster that runs on this host."""
    host, _ = split_address(address)
    return LOOPBACK if is_loopback(host) else None


@contextlib.contextmanager
def _loopback_node(node_ip: str | None) -> Iterator[None]:
    """For a loopback cluster: Ray treats this host as a single-host cluster, so neither the
    cluster's address nor the driver's own is rewritten to the interface address."""
    if node_ip != LOOPBACK:
        yield
        return
    import ray._private.ray_constants as constants

    saved = constants.ENABLE_RAY_CLUSTER
    constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = saved


def resolve_address(address: str) -> str:
    """`auto` -> the address of the cluster this host joined ($RAY_ADDRESS, else the one `ray start`
    recorded, else a running one); any other address is checked for form and returned."""
    if address != "auto":
        split_address(address)
        return address
    env = os.environ.get("RAY_ADDRESS")
    if env:
        split_address(env)
        return env
    from ray._private import services

    found = services.find_bootstrap_address(None)
    if found is None:
        services.find_gcs_addresses.cache_clear()
        running = services.find_gcs_addresses()
        found = next(iter(running), None) if running else None
    if found is None:
        raise InputError("--ray-address auto found no Ray cluster on this host (none was started here with "
                         "`ray start`, and $RAY_ADDRESS is unset); start one with `ray start --head`, or give "
                         "--ray-address HOST:PORT.")
    return found


def check_listening(address: str, timeout_s: float, shown: str | None = None) -> None:
    """InputError when nothing accepts a TCP connection at `address` within `timeout_s`
    (`shown`: how the message names the address)."""
    host, port = split_address(address)
    try:
        with socket.create_connection((host, port), timeout=max(0.1, timeout_s)):
            return
    except socket.timeout:
        cause = (f"nothing answered within {timeout_s:g} s (--ray-connect-timeout): the host is down or "
                 "unreachable from here, or a firewall drops the port")
    except ConnectionRefusedError:
        cause = ("nothing listens there: no Ray cluster is running at that address (start one with `ray start "
                 "--head`), or the port is not the one `ray start --head` printed")
    except OSError as exc:
        cause = f"{exc.strerror or exc}: the host name or address is wrong, or not reachable from here"
    raise InputError(f"cannot reach the Ray cluster at {shown or address}: {cause}.")


def probe_join(address: str, node_ip: str | None, timeout_s: float, shown: str | None = None,
               limit_s: float | None = None) -> None:
    """Join the cluster in a child process, killed after `timeout_s`; InputError when it cannot
    (`limit_s`: the --ray-connect-timeout the message names, when more than this try's share).

    Ray retries a join that is never answered without end and prints as it goes, so the first
    try is one whose process can be killed: the driver itself joins only once this one did."""
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    child = subprocess.Popen([sys.executable, "-m", "conformance.engine.ray_connect", address, node_ip or ""],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                             text=True, env=env, start_new_session=True)
    try:
        output, _ = child.communicate(timeout=max(0.1, timeout_s))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        raise InputError(
            f"cannot join the Ray cluster at {shown or address} within {limit_s or timeout_s:g} s "
            "(--ray-connect-timeout): something answers there but never admits this driver; the port may not "
            "be the cluster's (give the address "
            "`ray start --head` printed, 6379 unless changed, or ray://HOST:10001 for Ray Client), or this host "
            "is not a node of the cluster (run neuron-check on one of its nodes).") from None
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        raise
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if child.returncode != 0 or JOINED not in lines:
        said = lines[-1] if lines else f"the join ended with exit status {child.returncode}"
        raise InputError(f"cannot join the Ray cluster at {shown or address}: {said.rstrip('.')}.")


def join(ray: Any, address: str, node_ip: str | None) -> None:
    """ray.init for a cluster at `address`, the driver's node address following it."""
    with _loopback_node(node_ip):
        if address.startswith(CLIENT_SCHEME):
            ray.init(address=address, **QUIET)
        else:
            ray.init(address=address, _node_ip_address=node_ip, **QUIET)


def start_local(ray: Any, cpus: int) -> None:
    """A private Ray instance on this host, on loopback only, with `cpus` CPU slots."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    with _loopback_node(LOOPBACK):
        ray.init(address="local", num_cpus=cpus, include_dashboard=False, _node_ip_address=LOOPBACK, **QUIET)


def connect_cluster(ray: Any, address: str, timeout_s: float) -> str:
    """Join the cluster at --ray-address (`auto` resolved) within `timeout_s`; its address."""
    deadline = time.monotonic() + timeout_s
    target = resolve_address(address)  # `auto`: Ray's record of the cluster this host joined
    shown = target if address != "auto" else f"{target} (where --ray-address auto looked)"
    node_ip = driver_node_ip(target)
    check_listening(target, timeout_s, shown)
    # The child is killed a little before the deadline: its ending takes a moment too.
    probe_join(target, node_ip, max(0.1, deadline - time.monotonic() - KILL_MARGIN_S), shown, limit_s=timeout_s)
    try:
        join(ray, target, node_ip)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise InputError(f"cannot join the Ray cluster at {shown}: {_first_line(exc).rstrip('.')}.") from None
    return target


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("--executor ray needs Ray: pip install 'neuron-check[ray]'.") from None
    return ray


class RaySession:
    """This process's Ray for one run: a cluster joined (--ray-address), a private local instance
    started here, or the caller's own (Ray already initialised: used and left as found)."""

    def __init__(self) -> None:
        self.ray: Any = None
        self.owned = False  # this session initialised Ray, so it shuts it down
        self.local = False  # ... as a private instance on this host

    def open(self, address: str | None, timeout_s: float, cpus: int) -> Any:
        """Ray, initialised (once per session); InputError when the cluster cannot be joined."""
        if self.ray is not None:
            return self.ray
        ray = import_ray()
        if not ray.is_initialized():
            if address:
                connect_cluster(ray, address, timeout_s)
            else:
                try:
                    start_local(ray, cpus)
                except (ConnectionError, ValueError, RuntimeError) as exc:
                    raise InputError(f"cannot start a local Ray instance: {_first_line(exc)}") from None
                self.local = True
            self.owned = True
        self.ray = ray
        return ray

    def close(self) -> None:
        if self.owned and self.ray is not None:
            self.ray.shutdown()
        self.ray, self.owned, self.local = None, False, False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _probe_main(address: str, node_ip: str) -> int:
    """The child of `probe_join`: join, say so, leave."""
    import ray

    try:
        join(ray, address, node_ip or None)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as one line
        print(_first_line(exc), flush=True)
        return 1
    print(JOINED, flush=True)
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(_probe_main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""))
