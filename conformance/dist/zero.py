"""ZeRO-style sharding parity (`parity.zero1`, `parity.zero2`, `parity.zero3`, `parity.fsdp2_mp`,
`parity.fsdp2_offload`) and activation checkpointing under FSDP2 (`parity.fsdp2_ac`): the MLP
model of conformance/dist/mlp_stack.py trained data-parallel (the batch split over the ranks),
judged against the whole model on the CPU.

- `zero1`: DDP with `ZeroRedundancyOptimizer` over SGD with momentum: each rank keeps the
  optimizer state of its partition of the parameters, steps it and broadcasts it to the others.
- `zero3` / `zero2`: FSDP2 (`fully_shard` per block, then the root) with
  `reshard_after_forward=True` (parameters freed after forward, all-gathered again for backward)
  and `False` (kept from forward to backward; gradients still reduce-scattered, state sharded).
- `fsdp2_mp`: zero3 with `MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)`,
  judged in bfloat16 against the CPU run with the same mixed precision (mlp_stack.reference).
- `fsdp2_offload`: zero3 with `CPUOffloadPolicy()`: sharded parameters, gradients and the
  optimizer step on the CPU, all-gathered to the device for compute.
- `fsdp2_ac`: zero3 with each block wrapped by `checkpoint_wrapper` (torch.utils.checkpoint,
  non-reentrant) before `fully_shard`: the blocks' activations are recomputed in backward, so the
  gradients must be the non-checkpointed run's; `extra.block_forwards` counts the blocks' forward
  calls (2 x steps x blocks when every block was recomputed).
"""

from __future__ import annotations

from typing import Any

import torch

from conformance.dist import mlp_stack
from op_db.records import Result, WorkItem

WAYS = ("zero1", "zero2", "zero3", "fsdp2_mp", "fsdp2_offload", "fsdp2_ac")
MIXED_PARAM_DTYPE = torch.bfloat16
NEEDS = {"zero1": "ZeroRedundancyOptimizer (ZeRO-1)", "zero2": "FSDP2 without resharding (ZeRO-2)",
         "zero3": "FSDP2 (ZeRO-3)", "fsdp2_mp": "FSDP2 with mixed precision",
         "fsdp2_offload": "FSDP2 with CPU offload", "fsdp2_ac": "FSDP2 with activation checkpointing"}


def fsdp_options(way: str) -> dict[str, Any]:
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy

    if way == "zero2":
        return {"reshard_after_forward": False}
    if way == "fsdp2_mp":
        return {"mp_policy": MixedPrecisionPolicy(param_dtype=MIXED_PARAM_DTYPE, reduce_dtype=torch.float32)}
    if way == "fsdp2_offload":
        return {"offload_policy": CPUOffloadPolicy()}
    return {"reshard_after_forward": True}


def checkpointed(model: mlp_stack.Stack, forwards: list[int]) -> None:
    """Wrap each block in checkpoint_wrapper, counting its forward calls into `forwards`."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    for index, block in enumerate(model.blocks):
        block.register_forward_pre_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
        model.blocks[index] = checkpoint_wrapper(block)


def sharded(way: str, model: mlp_stack.Stack, device: str, world_size: int) -> tuple[Any, Any]:
    """(the model wrapped for `way`, its optimizer)."""
    if way == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        from torch.nn.parallel import DistributedDataParallel

        # Every rank builds the same seeded weights: no initial broadcast, so the only broadcasts
        # are ZeRO's own (each partition's updated parameters from the rank that stepped them).
        wrapped = DistributedDataParallel(model, init_sync=False)
        optimizer = ZeroRedundancyOptimizer(wrapped.parameters(), optimizer_class=torch.optim.SGD, lr=mlp_stack.LR,
                                            momentum=mlp_stack.MOMENTUM)
        return wrapped, optimizer
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.split(":", 1)[0], (world_size,))
    options = fsdp_options(way)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, **options)
    fully_shard(model, mesh=mesh, **options)
    return model, mlp_stack.optimizer_for(model.parameters())


def run_item(item: WorkItem, rctx: Any) -> Result:
    way = item.subject.split(".", 1)[1]
    forwards = [0]

    def wrap(model: mlp_stack.Stack) -> tuple[Any, Any]:
        if way == "fsdp2_ac":
            checkpointed(model, forwards)
        return sharded(way, model, rctx.device, rctx.world_size)

    extra = (lambda: {"block_forwards": forwards[0]}) if way == "fsdp2_ac" else dict
    return mlp_stack.run_way(item, rctx, wrap, NEEDS[way], data_parallel=True, extra=extra,
                             compute_dtype=MIXED_PARAM_DTYPE if way == "fsdp2_mp" else None)
