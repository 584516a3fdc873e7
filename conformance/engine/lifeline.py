"""How the processes of a run end together (README.md, "Reliability").

Two rules, one per side of the pipe:

- A worker dies with the process that started it, even when that one is SIGKILLed while the
  worker is stuck inside an op: `die_with_parent`, called first thing in every worker. On
  Linux the kernel does it (PR_SET_PDEATHSIG); elsewhere a daemon thread watches the parent.
- SIGTERM of the parent is a Ctrl-C: after `interrupt_on_sigterm`, SIGTERM raises
  `Terminated`, a KeyboardInterrupt, so every path that stops cleanly on Ctrl-C (the run is
  marked interrupted, finished items stay stored) stops the same way. `exit_status` gives
  the shell's convention for it: 128 + the signal, 130 for Ctrl-C, 143 for SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# How often the fallback watch asks whether the parent is still there, when it has no pipe to wait on.
PARENT_POLL_S = 1.0
# Exit status of a worker that outlived its parent (nobody reads it; it only has to be non-zero).
ORPHAN_EXIT = 1


def die_with_parent(parent_pid: int | None = None) -> None:
    """End this process as soon as its parent is gone: SIGKILL from the kernel on Linux,
    else a daemon thread that exits the process. `parent_pid` defaults to the
    multiprocessing parent, else the OS parent.

    PR_SET_PDEATHSIG fires when the parent *thread* that started us ends, so the parent must
    start workers from a thread that lives as long as the run (the engine uses the main thread).
    """
    import multiprocessing  # here, not at the top: the CLI imports this module for SIGTERM alone

    parent = multiprocessing.parent_process()
    if parent_pid is None:
        parent_pid = parent.pid if parent is not None and parent.pid else os.getppid()
    if not _kernel_kills_us_with_parent():
        _watch_parent(parent_pid, parent.sentinel if parent is not None else None)
    if os.getppid() != parent_pid:  # it was gone before we asked: nobody will signal us
        os._exit(ORPHAN_EXIT)


def _kernel_kills_us_with_parent() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent_pid: int, sentinel: int | None) -> None:
    """The portable fallback: multiprocessing's parent sentinel (a pipe end, or the parent's
    handle on Windows) becomes ready when the parent dies; without one, poll the parent pid."""

    def watch() -> None:
        import multiprocessing.connection

        if sentinel is not None:
            multiprocessing.connection.wait([sentinel])
        else:
            while os.getppid() == parent_pid:
                time.sleep(PARENT_POLL_S)
        os._exit(ORPHAN_EXIT)

    threading.Thread(target=watch, name="neuron-check-lifeline", daemon=True).start()


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt."""

    signum = signal.SIGTERM


def interrupt_on_sigterm() -> None:
    """From now on the first SIGTERM raises `Terminated` in the main thread. Later ones are
    ignored while the run stops: `timeout` and process managers send SIGTERM to the parent and
    again to its group, and a second one must not cut short the clean stop (SIGKILL still does)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)


def _raise_terminated(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


def interrupt_signal(interrupt: BaseException) -> int:
    """The signal behind a KeyboardInterrupt: SIGTERM for `Terminated`, SIGINT for Ctrl-C."""
    return int(getattr(interrupt, "signum", signal.SIGINT))


def exit_status(interrupt: BaseException) -> int:
    """128 + the signal, as a shell reports a process that signal ended."""
    return 128 + interrupt_signal(interrupt)
