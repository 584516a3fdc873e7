"""Workers forked from one process that has already imported torch and the suites' databases.

A spawned worker starts a fresh interpreter and imports torch and PyTorch's OpInfo database
itself: about 4 s of CPU each, paid again by every worker of `--jobs N` and by every
replacement of a crashed one, and on a 2-core machine two workers importing at once left the
second core nothing to run items with. Here one server process (multiprocessing's
forkserver) imports them once, started when the command starts so it imports while the
parent plans; each worker is then a fork of it, ready in milliseconds.

Forking is safe there because the server is not the command's process: it has imported
torch but initialised no device, opened no database, started no threads, and runs torch
with one intra-op thread so no OpenMP pool exists to be broken by the fork (each worker
sets its own thread count, then initialises the backend). The server dies with the process
that started it (lifeline.py), and its workers die with the server, so a SIGKILLed run
still takes a hung worker with it. Where there is no forkserver (Windows), workers are
spawned as before.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from typing import Any

# Which suites the server preloads: read by this module when the server imports it.
SUITES_ENV = "NEURON_CHECK_PRELOAD_SUITES"
# The server's pid, set in the server; its forked workers inherit it and die with it.
SERVER_PID: int | None = None


def available() -> bool:
    return "forkserver" in multiprocessing.get_all_start_methods()


def context(suites: tuple[str, ...]) -> Any:
    """The multiprocessing context workers start from: forks of the preloading server
    (started now with `suites` if not running), else spawn."""
    if not available():
        return multiprocessing.get_context("spawn")
    import multiprocessing.forkserver as forkserver

    mp = multiprocessing.get_context("forkserver")
    mp.set_forkserver_preload([__name__])
    # The server inherits the environment as it is now: the variable says what to preload
    # and is gone from this process again at once (workers get the parent's environment).
    os.environ[SUITES_ENV] = ",".join(suites)
    try:
        forkserver.ensure_running()
    finally:
        os.environ.pop(SUITES_ENV, None)
    return mp


def server_pid() -> int | None:
    """The server's pid in a worker forked from it (the worker's OS parent), else None."""
    return SERVER_PID if SERVER_PID is not None and SERVER_PID != os.getpid() else None


def _preload_in_server(suites: tuple[str, ...]) -> None:
    global SERVER_PID
    from conformance.engine.lifeline import die_with_parent

    SERVER_PID = os.getpid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's to handle, as in the workers
    die_with_parent()
    import torch

    torch.set_num_threads(1)  # no OpenMP pool is created here, so none is inherited broken
    from conformance.engine.import_noise import silence_known_noise
    from conformance.suite import preload_suites

    silence_known_noise()
    preload_suites(suites)


if os.environ.get(SUITES_ENV) is not None and SERVER_PID is None:
    try:
        _preload_in_server(tuple(filter(None, os.environ[SUITES_ENV].split(","))))
    except Exception:  # noqa: BLE001 - a worker's own start reports it (init-error), with context
        pass
