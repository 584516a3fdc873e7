"""Compile an item's callable and watch what dynamo and the backend compiler do with it.

`CompileWatch` wraps the backend, so it sees every graph dynamo captures; dynamo's compile
callbacks give each frame compile's id (frame/attempt: attempt > 0 is a recompile) and time;
dynamo's graph-break counter and break reasons (with the frame they happened in) are read as
differences over the watch. `facts()` gives the per-item `compile` record (README "Compile mode").

graph_ops are the aten overloads of the captured graphs: exactly the lowered graphs on sim
(its backend reports them), elsewhere the graph dynamo captured, traced to aten once.
"""

from __future__ import annotations

import dataclasses
import re
import time
import traceback
from collections import Counter
from typing import Any, Callable

import torch

from conformance.compiling.failures import phase_of
from conformance.compiling.settings import CompileSettings

_COMPILE_ID = re.compile(r"(\d+)/(\d+)")
MAX_REASONS = 20
# Frames of our own harness: a break reason names the first frame outside them (the user's or the op's).
_HARNESS = ("conformance/opinfo/", "conformance/compiling/", "conformance/models/runner.py",
            "torch/testing/_internal/")


@dataclasses.dataclass
class CompileFacts:
    backend: str
    graphs: int = 0
    graph_breaks: int = 0
    break_reasons: list[str] = dataclasses.field(default_factory=list)
    recompiles: int = 0
    compile_s: float = 0.0
    graph_ops: list[str] = dataclasses.field(default_factory=list)
    calls: int = 0  # calls of the compiled callable (samples, decode steps)
    cache_hits: int = 0  # calls served by graphs compiled before, compiling nothing
    phase: str | None = None  # of the failure, when the item failed in compile mode
    vs_eager: dict[str, Any] | None = None  # the compiled output against eager on the same device

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class CompileWatch:
    """Use as a context manager around every call of `compile(fn)`'s result."""

    def __init__(self, backend: str, settings: CompileSettings):
        self.backend, self.settings = backend, settings
        self.graphs = 0
        self.graph_ops: dict[str, None] = {}
        self.lowering = self.graph_ran = False  # a backend compile is under way; a compiled graph ran
        self.compile_s = 0.0
        self._frame_compiles: Counter = Counter()
        self.calls = self.cache_hits = 0
        self._compiles_at_enter = 0
        self._started: dict[str, float] = {}
        self._exit: Callable[[], None] | None = None
        from torch._dynamo.utils import counters, graph_break_reasons

        # Dynamo's counters are process-wide: the item's are what they gain from here on.
        self._breaks_before = Counter(counters["graph_break"])
        self._reasons_before = len(graph_break_reasons)

    # -- compiling --------------------------------------------------------------

    def compile(self, fn: Callable, *, dynamic: bool | None = None) -> Callable:
        import torch._dynamo as dynamo

        if self.backend == "sim":
            from conformance.sim.compiler import register_compile_backend

            register_compile_backend()
        # One compiled callable sees every sample's shapes: recompile rather than fall back to eager.
        for name in ("recompile_limit", "cache_size_limit"):
            if hasattr(dynamo.config, name):
                setattr(dynamo.config, name, 64)
        return torch.compile(fn, backend=self._watched(), fullgraph=self.settings.fullgraph,
                             dynamic=self.settings.dynamic if dynamic is None else dynamic)

    def _watched(self) -> Callable:
        inner = self.settings.backend_compiler(self.backend)

        def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
            self.graphs += 1
            self.lowering = True
            if self.backend == "sim":  # it reports the graphs it lowers
                from conformance.sim.compiler import observe_graphs

                with observe_graphs(self._record_aten_graph):
                    compiled = inner(gm, example_inputs)
            else:
                self._record_captured(gm, example_inputs)
                compiled = inner(gm, example_inputs)
            self.lowering = False
            return self._marking_runs(compiled)

        backend.__name__ = self.backend  # dynamo's messages name the backend by it
        return backend

    def _marking_runs(self, compiled: Callable) -> Callable:
        watch = self
        boxed = getattr(compiled, "_boxed_call", False)

        def run(*args):
            watch.graph_ran = True
            return compiled(*args)

        run._boxed_call = boxed  # dynamo calls boxed compilers with one list
        return run

    def _record_aten_graph(self, gm: torch.fx.GraphModule) -> None:
        for node in gm.graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                self.graph_ops.setdefault(str(node.target), None)

    def _record_captured(self, gm: torch.fx.GraphModule, example_inputs: list) -> None:
        """The captured graph traced to aten under fake tensors (no real compute)."""
        from torch._guards import detect_fake_mode
        from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
        from torch.fx.experimental.proxy_tensor import make_fx

        try:
            mode = detect_fake_mode(example_inputs) or FakeTensorMode(allow_non_fake_inputs=True)
            fake = [mode.from_tensor(x) if isinstance(x, torch.Tensor) and not isinstance(x, FakeTensor) else x
                    for x in example_inputs]
            with mode:
                traced = make_fx(gm, tracing_mode="real")(*fake)
        except Exception:  # noqa: BLE001 - observation only: the backend's own compile decides
            return
        self._record_aten_graph(traced)

    # -- watching ---------------------------------------------------------------

    def __enter__(self) -> "CompileWatch":
        """Listen to dynamo's compiles while the compiled callable runs (re-entered per call)."""
        from torch._dynamo import callback_handler

        def start(args) -> None:
            self._started[args.compile_id] = time.perf_counter()

        def end(args) -> None:
            began = self._started.pop(args.compile_id, None)
            if began is not None:
                self.compile_s += time.perf_counter() - began
            found = _COMPILE_ID.search(args.compile_id)
            if found:
                self._frame_compiles[found.group(1)] += 1

        callback_handler.register_start_callback(start)
        callback_handler.register_end_callback(end)

        def remove() -> None:
            callback_handler.remove_start_callback(start)
            callback_handler.remove_end_callback(end)

        self._exit = remove
        self.calls += 1
        self._compiles_at_enter = sum(self._frame_compiles.values())
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._exit is not None:
            self._exit()
            self._exit = None
            if sum(self._frame_compiles.values()) == self._compiles_at_enter:
                self.cache_hits += 1

    def failure_phase(self, exc: BaseException) -> str:
        return phase_of(exc, lowering=self.lowering, graph_ran=self.graph_ran)

    def facts(self, *, phase: str | None = None) -> CompileFacts:
        from torch._dynamo.utils import counters, graph_break_reasons

        breaks = sum((Counter(counters["graph_break"]) - self._breaks_before).values())
        reasons: dict[str, None] = {}
        for reason in graph_break_reasons[self._reasons_before:]:
            reasons.setdefault(_describe(reason), None)
        return CompileFacts(
            backend=self.backend, graphs=self.graphs, graph_breaks=max(breaks, 0),
            break_reasons=list(reasons)[:MAX_REASONS],
            recompiles=sum(n - 1 for n in self._frame_compiles.values() if n > 1),
            compile_s=round(self.compile_s, 4), graph_ops=sorted(self.graph_ops), calls=self.calls,
            cache_hits=self.cache_hits, phase=phase,
        )


def _describe(reason: Any) -> str:
    """'Dynamic shape operator (aten.nonzero.default) at torch/functional.py:12 in f': the
    reason's first line, its debug context, and the first frame outside the harness."""
    text = str(getattr(reason, "reason", reason))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    head = lines[0] if lines else "graph break"
    context = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("Developer debug context:")), "")
    if context and len(context) <= 120:
        head = f"{head} ({context})"
    frame = _user_frame(getattr(reason, "user_stack", None) or [])
    return f"{head} at {frame}" if frame else head


def _user_frame(stack: list[traceback.FrameSummary]) -> str:
    for frame in reversed(stack):
        path = frame.filename.replace("\\", "/")
        if not any(part in path for part in _HARNESS):
            short = "/".join(path.split("/")[-2:])
            return f"{short}:{frame.lineno} in {frame.name}"
    return ""
