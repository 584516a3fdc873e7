"""Remaps of library entry points that take a CUDA device or backend (used by remap.py).

* `DataLoader(pin_memory=True)` when the target has no pinned memory: pinning is dropped;
* `torch.load(map_location="cuda:N" | torch.device("cuda") | {...: "cuda"})`: the target;
* `torch.distributed.init_process_group(backend="nccl")` (or `cuda:nccl`, or a list holding
  it): the process-group backend registered for the target's device type (`sim` for sim, as
  `hccl` for npu), else gloo; a CUDA `device_id=` is dropped;
* `DistributedDataParallel(device_ids=[rank], output_device=rank)`: both dropped, as for any
  single-device module that is not on CUDA.

Each is logged at the user's line, so the report lists it as "works by remap".
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from porting_cli.runtime.remap_log import RemapLog, describe_device, is_cuda_device

Patch = tuple[Any, str, Any]


def library_patches(target: str, log: RemapLog, pinning: bool) -> list[Patch]:
    device_type = torch.device(target).type
    patches: list[Patch] = [(torch, "load", _load(torch.load, target, log))]
    if not pinning:
        patches.append(_dataloader(device_type, log))
    if device_type != "cuda" and torch.distributed.is_available():
        from torch.nn.parallel import DistributedDataParallel

        patches.append((torch.distributed, "init_process_group",
                        _init_process_group(torch.distributed.init_process_group, log, device_type)))
        patches.append((DistributedDataParallel, "__init__", _ddp_init(DistributedDataParallel.__init__, log)))
    return patches


def _load(load: Callable[..., Any], target: str, log: RemapLog) -> Callable[..., Any]:
    def remapped_load(*args: Any, **kwargs: Any) -> Any:
        where = kwargs.get("map_location")
        if is_cuda_device(where):
            log(f"torch.load(map_location={describe_device(where)}) -> {target!r}")
            kwargs["map_location"] = target
        elif isinstance(where, dict) and any(is_cuda_device(v) for v in where.values()):
            log(f"torch.load(map_location={{...: 'cuda'}}) -> {target!r}")
            kwargs["map_location"] = {k: target if is_cuda_device(v) else v for k, v in where.items()}
        return load(*args, **kwargs)

    return remapped_load


def _dataloader(device_type: str, log: RemapLog) -> Patch:
    loader = torch.utils.data.DataLoader
    original = loader.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("pin_memory"):
            log(f"DataLoader(pin_memory=True) -> pin_memory=False ({device_type} has no pinned memory)")
            kwargs["pin_memory"] = False
        original(self, *args, **kwargs)

    return (loader, "__init__", init)


def _instead_of_nccl(backend: Any, device_type: str) -> Any:
    """The target's own process-group backend (the one registered for its device type, as
    torch_npu registers hccl), else gloo, where the script asks for NCCL."""
    if isinstance(backend, str) and "nccl" in backend.lower():
        return torch.distributed.Backend.default_device_backend_map.get(device_type) or "gloo"
    return backend


def _init_process_group(init: Callable[..., Any], log: RemapLog, device_type: str) -> Callable[..., Any]:
    def remapped_init(backend: Any = None, *args: Any, **kwargs: Any) -> Any:
        if "backend" in kwargs:
            backend = kwargs.pop("backend")
        gloo = _instead_of_nccl(backend, device_type)
        if gloo != backend:
            log(f"init_process_group(backend={backend!r}) -> {gloo!r}")
        device_id = kwargs.get("device_id")
        if device_id is not None and (is_cuda_device(device_id) or isinstance(device_id, int)):
            log(f"init_process_group(device_id={device_id!r}) -> no device_id")
            kwargs.pop("device_id")
        return init(gloo, *args, **kwargs)

    return remapped_init


def _ddp_init(init: Callable[..., Any], log: RemapLog) -> Callable[..., Any]:
    def remapped_init(self: Any, module: Any, device_ids: Any = None, output_device: Any = None,
                      *args: Any, **kwargs: Any) -> None:
        if device_ids is not None or output_device is not None:
            log("DistributedDataParallel(device_ids=..., output_device=...) -> single-device defaults")
        init(self, module, None, None, *args, **kwargs)

    return remapped_init
