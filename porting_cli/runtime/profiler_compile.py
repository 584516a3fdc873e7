"""torch.compile's graph breaks and recompiles, each attributed to the user's source line.

Dynamo reports both through its artifact loggers (`graph_breaks`, `recompiles`: what
`TORCH_LOGS="graph_breaks,recompiles"` prints). While the script runs, a handler on the `torch`
logger collects those records and reads them:

- a graph break names the place of the break ("Graph break in user code at FILE:LINE") and its
  reason, with the user code traceback below; where the place is library code (a break inside
  Transformers' attention), the innermost frame of the traceback in the user's code is the line;
- a recompile names the function recompiled ("Recompiling function NAME in FILE:LINE", its first
  line) and the guard failures that caused it; the line is the function's `def` line when it is
  the user's, else the innermost user frame of the stack at the time of the recompile.

Each event is {"file", "line", "kind": "graph_break" | "recompile", "reason"}; events outside
any user line are kept with file "(no user line)", as the profiler's rows are.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import sys
from typing import Any, Iterator

_GRAPH_BREAK = re.compile(r"Graph break(?: \([^)]*\))? in user code at (?P<file>.+?):(?P<line>\d+)\s*\n"
                          r"Graph Break Reason: (?P<reason>[^\n]*)")
_RECOMPILE = re.compile(r"Recompiling function (?P<name>\S+) in (?P<file>.+?):(?P<line>\d+)\s*\n(?P<rest>.*)", re.S)
_EXPLANATION = re.compile(r"^\s*Explanation: (?P<why>[^\n]+)", re.M)
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_REASON_CHARS = 300
NO_USER_LINE = "(no user line)"


class CompileEvents(logging.Handler):
    """Collects Dynamo's graph-break and recompile records as attributed events."""

    def __init__(self, frames: Any) -> None:
        super().__init__(level=logging.DEBUG)
        self.frames = frames
        self.events: list[dict[str, Any]] = []
        self._seen: set[tuple[str, int, str, str]] = set()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record of torch's must not stop the script
            return
        event = self.read(text)
        if event is None:
            return
        key = (event["file"], event["line"], event["kind"], event["reason"])
        if event["kind"] == "recompile" or key not in self._seen:
            self._seen.add(key)
            self.events.append(event)

    def read(self, text: str) -> dict[str, Any] | None:
        found = _GRAPH_BREAK.search(text) or _RECOMPILE.search(text)
        if found and _is_the_tools(found["file"]):
            return None
        found = _GRAPH_BREAK.search(text)
        if found:
            place = self._user_place([(found["file"], int(found["line"]))] + _traceback(text))
            explained = _EXPLANATION.search(text)
            reason = explained["why"] if explained else found["reason"]
            return {**place, "kind": "graph_break", "reason": reason.strip()[:_REASON_CHARS]}
        found = _RECOMPILE.search(text)
        if found:
            stack = [(found["file"], int(found["line"]))] + _live_user_stack(self.frames)
            reasons = [line.strip(" -") for line in found["rest"].splitlines()
                       if line.strip().startswith("-")]
            reason = "; ".join(reasons) or found["rest"].strip()
            return {**self._user_place(stack), "kind": "recompile",
                    "reason": f"{found['name']}: {reason}"[:_REASON_CHARS]}
        return None

    def _user_place(self, candidates: list[tuple[str, int]]) -> dict[str, Any]:
        """The first candidate in the user's code: the named place, then the traceback innermost first."""
        for file, line in candidates:
            if self.frames.is_user(file):
                shown, _, number = self.frames.format(file, line).rpartition(":")
                return {"file": shown, "line": int(number)}
        return {"file": NO_USER_LINE, "line": 0}


@functools.lru_cache(maxsize=1)
def _own_folders() -> tuple[str, ...]:
    """The tool's code, and torch's record_function, which only the tool's ranges call here."""
    import torch.autograd.profiler

    import conformance
    import porting_cli

    folders = [os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (porting_cli, conformance)]
    return (*folders, os.path.abspath(torch.autograd.profiler.__file__))


def _is_the_tools(file: str) -> bool:
    """Dynamo compiles every frame that runs inside a compiled region's eager parts, the tool's
    own (the site and remap modes, record_function) included: their breaks and recompiles are
    not the script's."""
    return os.path.abspath(file).startswith(_own_folders())


def _traceback(text: str) -> list[tuple[str, int]]:
    """The frames of a formatted traceback in `text`, innermost first."""
    return [(m["file"], int(m["line"])) for m in _FRAME.finditer(text)][::-1]


def _live_user_stack(frames: Any) -> list[tuple[str, int]]:
    """The stack now running (a recompile is logged while the call that caused it waits), innermost first."""
    stack, frame = [], sys._getframe(1)
    while frame is not None:
        stack.append((frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return stack


_ARTIFACTS = ("graph_breaks", "recompiles")


@contextlib.contextmanager
def watch_compiles(handler: CompileEvents) -> Iterator[CompileEvents]:
    """Collect graph breaks and recompiles into `handler` while the block runs. Dynamo's artifact loggers
    (`torch._dynamo.<module>.__graph_breaks`, `...__recompiles`) do not propagate once turned on,
    so the handler goes on each of them."""
    import torch._dynamo  # noqa: F401 - creates the artifact loggers
    import torch._logging

    torch._logging.set_logs(graph_breaks=True, recompiles=True)
    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
               if name.startswith("torch.") and name.rpartition(".__")[2] in _ARTIFACTS]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        torch._logging.set_logs()
