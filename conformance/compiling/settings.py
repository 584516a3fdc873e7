"""How a run compiles: the torch.compile backend and the options passed through to it.

`CompileSettings` travels in `RunConfig.compile`. The backend is the adapter's own unless
`--compile-backend` names another (conformance/backends: `neuron` -> "neuron", cpu/cuda/xpu
-> Inductor, sim -> the sim backend).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from typing import Any, Callable

from op_db.errors import InputError


@dataclasses.dataclass(frozen=True)
class CompileSettings:
    backend: str | None = None  # None: the adapter's own
    fullgraph: bool = False  # a graph break is a failure (dynamo's fullgraph=True)
    dynamic: bool = False  # mark the batch dimension dynamic and run a second batch size
    options: tuple[tuple[str, Any], ...] = ()  # the backend's options (torch.compile(options=...))

    @property
    def options_dict(self) -> dict[str, Any]:
        return dict(self.options)

    def backend_compiler(self, backend: str) -> Callable:
        """`backend`'s compiler, `(graph_module, example_inputs) -> callable`, with the options bound."""
        options = self.options_dict
        if backend == "inductor":
            from torch._inductor.compile_fx import compile_fx

            return lambda gm, inputs: compile_fx(gm, inputs, config_patches=options or None)
        from torch._dynamo.backends.registry import lookup_backend

        inner = lookup_backend(backend)
        return (lambda gm, inputs: inner(gm, inputs, **options)) if options else inner

    def to_dict(self) -> dict[str, Any]:
        return {"compile_backend": self.backend, "fullgraph": self.fullgraph, "dynamic": self.dynamic,
                "compile_options": self.options_dict or None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CompileSettings":
        options = data.get("compile_options") or {}
        return cls(backend=data.get("compile_backend"), fullgraph=bool(data.get("fullgraph")),
                   dynamic=bool(data.get("dynamic")), options=tuple(sorted(options.items())))


def parse_compile_options(text: str | None) -> tuple[tuple[str, Any], ...]:
    """`--compile-options '{"max_autotune": true}'` -> sorted (key, value) pairs."""
    if not text:
        return ()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"--compile-options must be a JSON object, for example '{{\"max_autotune\": true}}': {exc}.") from None
    if not isinstance(value, dict):
        raise InputError("--compile-options must be a JSON object, for example '{\"max_autotune\": true}'.")
    return tuple(sorted(value.items()))


def check_backend(name: str) -> None:
    """An InputError unless torch.compile knows `name` (sim's backend is registered first)."""
    import torch._dynamo as dynamo

    known = set(dynamo.list_backends(exclude_tags=())) | {"sim"}  # sim's is registered in its workers
    if name not in known:
        raise InputError(f"unknown --compile-backend {name!r}; torch.compile knows: {', '.join(sorted(known))}.")


@contextlib.contextmanager
def default_compiler(settings: CompileSettings, backend: str | None):
    """`torch.compile` without a backend compiles with `backend` (options from `settings` bound)
    inside the block, as it does for a user who ran `torch.compiler.set_default_backend`
    (TorchNeuron's advice): eager models that compile pieces themselves (Transformers compiles
    flex attention) reach the backend's compiler. What the block compiled is dropped on exit, so
    a long run's items do not pile up compiled frames past dynamo's recompile limit (past it,
    dynamo runs the frame uncompiled and the backend's compiler is no longer what is checked).
    None leaves PyTorch's default."""
    import torch

    if backend is None:
        yield
        return
    if backend == "sim":  # registered with dynamo on first use (sim/compiler.py)
        from conformance.sim.compiler import register_compile_backend

        register_compile_backend()
    before = torch.compiler.get_default_backend()
    torch.compiler.set_default_backend(settings.backend_compiler(backend))
    try:
        yield
    finally:
        torch.compiler.set_default_backend(before)
        torch._dynamo.reset()
