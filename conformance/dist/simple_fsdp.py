"""SimpleFSDP parity (`parity.simple_fsdp`, eager and compile mode): torchtitan's compiler-based
FSDP, written here from its design (torchtitan's own package cannot be a dependency: installing
it downgrades datasets and fsspec beside the pinned stack).

The design: every parameter is stored as a DTensor sharded Shard(0) over the data-parallel mesh,
and a parametrization (`torch.nn.utils.parametrize`) turns it into the full tensor each time the
module reads it, by redistributing it to Replicate (an all-gather) and taking the local tensor
with Partial gradient placements. Autograd then carries the gradient back through that
redistribution as a reduce-scatter into the Shard(0) parameter's gradient: FSDP with no hooks
and no runtime of its own, so in compile mode dynamo traces the all-gathers and reduce-scatters
into the graphs the backend's compiler receives (what torchtitan relies on to overlap them).

The gradients' Partial placement is a mean (`Partial("avg")`), so the reduce-scatter averages the
ranks' gradients of their mean losses, which is the whole batch's gradient the CPU reference has.
The tiny stack of conformance/dist/training.py is trained on each rank's rows
(conformance/dist/data_parallel.py) and judged by training.verdict against the whole model on the
CPU; compile mode compiles the model with the run's compile backend (sim's on sim) and records the
compile facts.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn

from conformance.dist import data_parallel, training
from op_db.records import Result, Status, WorkItem

_PARAMETRIZED = ".parametrizations."


class GatherForCompute(nn.Module):
    """The parametrization: the Shard(0) DTensor parameter -> its full local tensor."""

    def __init__(self, mesh: Any) -> None:
        super().__init__()
        self.mesh = mesh

    def forward(self, sharded: Any) -> torch.Tensor:
        from torch.distributed.tensor import Partial, Replicate

        whole = sharded.redistribute(self.mesh, [Replicate()] * self.mesh.ndim)
        return whole.to_local(grad_placements=[Partial("avg")] * self.mesh.ndim)


def data_parallel_shard(model: nn.Module, mesh: Any) -> nn.Module:
    """Shard every parameter of `model` Shard(0) over `mesh`, gathered by parametrization."""
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch.nn.utils import parametrize

    for module in list(model.modules()):
        for name, param in list(module.named_parameters(recurse=False)):
            sharded = nn.Parameter(distribute_tensor(param.detach(), mesh, [Shard(0)] * mesh.ndim))
            module.register_parameter(name, sharded)
            # unsafe: the parametrization changes the tensor's type (DTensor -> Tensor), which the
            # safe path's consistency check refuses.
            parametrize.register_parametrization(module, name, GatherForCompute(mesh), unsafe=True)
    return model


def plain_name(name: str) -> str:
    """`1.linear.parametrizations.weight.original` -> `1.linear.weight`."""
    if _PARAMETRIZED not in name:
        return name
    owner, _, rest = name.partition(_PARAMETRIZED)
    return f"{owner}.{rest.removesuffix('.original')}"


def renamed(run: training.Run) -> training.Run:
    return training.Run(run.losses, {plain_name(k): v for k, v in run.grads.items()},
                        {plain_name(k): v for k, v in run.weights.items()})


def compiled_forward(model: nn.Module, rctx: Any) -> tuple[Any, Any]:
    """The model compiled with the run's backend, and the watch reporting its compiles."""
    from conformance.compiling.watch import CompileWatch

    backend = rctx.config.compile.backend or rctx.adapter.compile_backend
    watch = CompileWatch(backend, rctx.config.compile)
    compiled = watch.compile(model)

    def forward(ids: torch.Tensor) -> torch.Tensor:
        with watch:
            return compiled(ids)

    return forward, watch


def run_item(item: WorkItem, rctx: Any) -> Result:
    reason = data_parallel.not_applicable(rctx.world_size)
    if reason is not None:
        return Result.for_item(item, Status.SKIP, message=reason)
    started = time.perf_counter()
    dtype = getattr(torch, item.dtype)
    mesh = data_parallel.mesh(rctx)
    watch, facts = None, {}
    with rctx.adapter.track_fallbacks() as fallbacks:
        try:
            model = data_parallel_shard(training.whole(rctx.seed, dtype).to(rctx.device), mesh)
            forward, watch = compiled_forward(model, rctx) if item.mode == "compile" else (model, None)
            run = renamed(training.snapshot(data_parallel.train(model, rctx, forward), model))
            rctx.adapter.synchronize()
            facts = watch.facts().to_dict() if watch is not None else {}
        except Exception as exc:  # noqa: BLE001 - the backend (its compiler, its collectives) failed
            facts = watch.facts(phase=watch.failure_phase(exc)).to_dict() if watch is not None else {}
            failed = data_parallel.failure(item, exc, started, f"SimpleFSDP ({item.mode})")
            failed.compile = facts
            return failed
        finally:
            if watch is not None:
                torch._dynamo.reset()  # the next item compiles afresh, with its own backend and shapes
    result = training.verdict(item, run, rctx.seed, sorted(fallbacks.ops), started)
    result.compile = facts
    return result
