"""The process tree of a traced script: mark it, find it, end it. Linux /proc; no psutil.

Every process of a trace inherits the environment variable TRACE_TOKEN_ENV (a random token)
from the trace's root, so the whole tree is found through /proc/PID/environ even after a
descendant has left the session (setsid) or been re-parented to init. Python descendants also
ask the kernel to kill them when their parent dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import os
import signal
import time

TRACE_TOKEN_ENV = "NEURON_CHECK_TRACE_TOKEN"
PR_SET_PDEATHSIG = 1
# multiprocessing's own helpers end with their parent; killing one is no news to report.
HELPER_MARKERS = (b"multiprocessing.resource_tracker", b"multiprocessing.forkserver")


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send `sig` to this process when its parent exits (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def tagged_pids(token: str) -> list[int]:
    """Live processes (zombies left out) whose environment holds `token`; never this process."""
    needle = f"{TRACE_TOKEN_ENV}={token}".encode()
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                if needle not in handle.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rpartition(b")")[2].split()[0]
        except OSError:
            continue
        if state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def kill_tagged(token: str, grace_s: float = 0.0) -> int:
    """End every process of the tree: SIGTERM and `grace_s` to finish, then SIGKILL.
    Returns how many processes were found, multiprocessing's helpers left out."""
    pids = tagged_pids(token)
    if not pids:
        return 0
    found = sum(not _is_helper(pid) for pid in pids)
    if grace_s > 0:
        _signal_all(pids, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and tagged_pids(token):
            time.sleep(0.05)
    for _ in range(20):  # a process may fork while we kill; sweep until nothing is left
        left = tagged_pids(token)
        if not left:
            break
        _signal_all(left, signal.SIGKILL)
        time.sleep(0.05)
    return found


def _is_helper(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read()
    except OSError:
        return False
    return any(marker in cmdline for marker in HELPER_MARKERS)


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
