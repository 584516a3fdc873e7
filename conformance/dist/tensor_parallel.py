"""Tensor-parallel training parity (`parity.tp`, `parity.tp_sp`): the MLP model of
conformance/dist/mlp_stack.py cut over a 1-D mesh of the whole world with `parallelize_module`,
trained on the device, judged against the whole model on the CPU.

`tp`: each block's MLP column-wise then row-wise (`up` ColwiseParallel, `down` RowwiseParallel:
the hidden activations stay sharded, the row-wise output is all-reduced); the rest is replicated.
`tp_sp` adds sequence parallelism as Megatron does: activations between the MLPs are sharded on
the sequence dimension, the norms are SequenceParallel (their weights replicated DTensors whose
gradients DTensor reduces), each MLP gathers the sequence before `up` (PrepareModuleInput
Shard(1) -> Replicate) and reduce-scatters after `down` (RowwiseParallel output Shard(1)); the
embedding is row-wise (vocabulary-sharded, output Shard(1)) and the head column-wise from a
sequence-sharded input to a replicated output. Every rank sees the whole batch and judges every
parameter, gathered whole.
"""

from __future__ import annotations

from typing import Any

import torch

from conformance.dist import mlp_stack
from op_db.records import Result, WorkItem

WAYS = ("tp", "tp_sp")


def plans(way: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the plan of the model's top, the plan of each block)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel)

    if way == "tp":
        return {}, {"mlp.up": ColwiseParallel(), "mlp.down": RowwiseParallel()}
    top = {"embed": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
           "norm": SequenceParallel(),
           "head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())}
    block = {"norm": SequenceParallel(),
             "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
             "mlp.up": ColwiseParallel(),
             "mlp.down": RowwiseParallel(output_layouts=Shard(1))}
    return top, block


def parallelized(way: str, model: torch.nn.Module, device: str, world_size: int) -> torch.nn.Module:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module

    mesh = init_device_mesh(device.split(":", 1)[0], (world_size,))
    top, block = plans(way)
    for layer in model.blocks:
        parallelize_module(layer, mesh, block)
    return parallelize_module(model, mesh, top) if top else model


def run_item(item: WorkItem, rctx: Any) -> Result:
    way = item.subject.split(".", 1)[1]

    def wrap(model: torch.nn.Module) -> tuple[Any, Any]:
        model = parallelized(way, model, rctx.device, rctx.world_size)
        return model, mlp_stack.optimizer_for(model.parameters())

    return mlp_stack.run_way(item, rctx, wrap, "tensor parallel" if way == "tp" else "sequence parallel",
                             data_parallel=False)
