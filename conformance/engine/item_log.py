"""What a checking process writes to stderr goes to the item's log, not the user's terminal.

Third-party code in a worker or rank warns on file descriptor 2 directly: torch's C++ logger
("logger.cpp:329 ... Time stats are currently only collected for CPU and CUDA devices"),
Python loggers (DTensor's "sequential all_gather"), `warnings`. None of it is the user's
business at the terminal, and all of it may explain a result. So the process's fd 2 goes to
a file of its own, and after each item the new part is read back into `Result.extra["log"]`.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings

from op_db.records import Result, shorten

LOG_LIMIT = 4000


class ItemLog:
    """Owns this process's stderr from construction on; `attach(result)` files the item's share."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()
        sys.stderr.flush()
        os.dup2(self._file.fileno(), 2)
        self._read = 0
        warnings.simplefilter("default")  # written to the log, once per place, instead of dropped
        self.take()  # what setting up the process said belongs to no item

    def take(self) -> str:
        """Everything written to stderr since the last call."""
        for stream in (sys.stderr, sys.__stderr__):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        self._file.seek(self._read)
        data = self._file.read()
        self._read += len(data)
        return data.decode("utf-8", "backslashreplace")

    def attach(self, result: Result) -> Result:
        text = self.take().strip()
        if text:
            result.extra["log"] = shorten(text, LOG_LIMIT)
        return result
