"""Which stack frame is "the user's line": the blame rule of the porting trace.

User code is the entry script plus every file below the project root (the script's folder for
a single file), leaving out installed packages, virtualenvs and build output inside the root
(porting_cli/analysis/project.py decides which folders those are) and neuron-check's own packages.

The site of an op or of a remapped call is the innermost user frame of the thread that made
the call. A thread with no user frame of its own is blamed on the user line that started it
(threading.Thread.start is noted by `note_thread_start`: a DataLoader's pin-memory thread is
blamed on the line that made the iterator); a thread that Python did not start, such as the
autograd engine's, is blamed on the line the main thread is waiting at (`loss.backward()`).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from porting_cli.analysis.project import is_skipped_dir

# neuron-check's own packages: never "the user's code", even below the script's folder.
_OWN_PACKAGES = ("porting_cli", "conformance", "op_db", "reports")
THREAD_SITE_ATTR = "_neuron_check_start_site"


class UserFrames:
    """Finds the innermost stack frame that belongs to the user's project."""

    def __init__(self, script: str, root: str | None = None, display_base: str | None = None):
        self.script = os.path.abspath(script)
        self.root = os.path.abspath(root) if root else os.path.dirname(self.script)
        self.display_base = os.path.abspath(display_base) if display_base else None
        self.thread_id = threading.get_ident()
        self._cache: dict[str, bool] = {}
        # the folder holding the porting_cli package (this file is porting_cli/runtime/...)
        own = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self._excluded = [os.path.join(own, name) + os.sep for name in _OWN_PACKAGES]
        self._excluded += [os.path.abspath(p) + os.sep for p in {sys.prefix, sys.base_prefix} if p]
        try:
            import torch

            self._excluded.append(os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)
        except ImportError:  # the frames rule itself does not need torch
            pass

    def is_user(self, filename: str) -> bool:
        known = self._cache.get(filename)
        if known is None:
            path = os.path.abspath(filename)
            # "<eval_with_key>.3" (an FX graph's generated code), "<string>", "<frozen ...>": no file of the user's
            known = path == self.script or (
                not filename.startswith("<")
                and path.startswith(self.root + os.sep)
                and "site-packages" not in path
                and not any(path.startswith(ex) for ex in self._excluded)
                and not self._in_skipped_dir(path)
            )
            self._cache[filename] = known
        return known

    def _in_skipped_dir(self, path: str) -> bool:
        folder = os.path.dirname(path)
        while folder.startswith(self.root + os.sep):
            if is_skipped_dir(folder):
                return True
            folder = os.path.dirname(folder)
        return False

    def innermost(self, frame: Any) -> str | None:
        while frame is not None:
            if self.is_user(frame.f_code.co_filename):
                return self.format(frame.f_code.co_filename, frame.f_lineno)
            frame = frame.f_back
        return None

    def site(self) -> str | None:
        """'path:line' of the innermost user frame now running, or None (library code)."""
        own = self.innermost(sys._getframe(1))
        if own is not None or threading.get_ident() == self.thread_id:
            return own
        started_at = getattr(threading.current_thread(), THREAD_SITE_ATTR, None)
        if started_at is not None:
            return started_at
        return self.innermost(sys._current_frames().get(self.thread_id))

    def note_thread_start(self, thread: threading.Thread) -> None:
        """Remember the user line that started `thread` (its site when it has none of its own)."""
        site = self.innermost(sys._getframe(2))
        if site is None:
            parent = getattr(threading.current_thread(), THREAD_SITE_ATTR, None)
            site = parent if parent is not None else self.innermost(sys._current_frames().get(self.thread_id))
        setattr(thread, THREAD_SITE_ATTR, site)

    def traceback_site(self, tb: Any) -> str | None:
        """'path:line' of the innermost user frame of a traceback."""
        found = None
        while tb is not None:
            if self.is_user(tb.tb_frame.f_code.co_filename):
                found = self.format(tb.tb_frame.f_code.co_filename, tb.tb_lineno)
            tb = tb.tb_next
        return found

    def format(self, filename: str, line: int) -> str:
        return f"{display_path(filename, self.display_base)}:{line}"


def display_path(path: str, base: str | None = None) -> str:
    """Relative to `base` (default: the working directory) when below it, as SARIF and editors like it."""
    path = os.path.abspath(path)
    rel = os.path.relpath(path, base) if base else os.path.relpath(path)
    return path if rel.startswith("..") else rel.replace(os.sep, "/")
