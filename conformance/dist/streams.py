"""Streams and events on the backend, through torch.accelerator and the device-generic API.

Each check enqueues work whose right answer depends on the ordering it tests, so a backend
that ignores a wait or a record shows a wrong value (MISMATCH), and one that lacks the API
raises (UNSUPPORTED/ERROR through conformance/outcome.py):

* order: work on a side stream, an event recorded there, the current stream waiting on the
  event, then dependent work on the current stream; `Event.query()` after a wait;
* synchronize: `Stream.synchronize()` and `torch.accelerator.synchronize()`, `Stream.query()`
  after them;
* event_timing: timing events recorded around work on a stream, `Event.synchronize()`,
  `Event.query()` and `elapsed_time` (>= 0) between them (a backend whose device guard has no
  event synchronisation or timing raises here, and only here);
* device_module: the same ordering through `torch.get_device_module(device)` (Stream, Event,
  current_stream, stream(...)), the API FSDP2 and DDP use.
"""

from __future__ import annotations

from typing import Any

import torch

from conformance.dist.judge import judge
from op_db.records import Result, WorkItem

SIZE = 4096


def _inputs(seed: int) -> torch.Tensor:
    return torch.randn(SIZE, generator=torch.Generator().manual_seed(seed))


def _expected(x: torch.Tensor) -> list[Any]:
    y = x * 2 + 1
    return [(y * y).sum(), y, True]


def _order(x: torch.Tensor, device: str) -> list[Any]:
    side = torch.Stream(device=device)
    current = torch.accelerator.current_stream(torch.device(device))
    a = x.to(device)
    side.wait_stream(current)  # `a` was made on the current stream
    with side:
        y = a * 2 + 1
        done = side.record_event()
    current.wait_event(done)
    z = (y * y).sum()
    finished = current.record_event()
    current.wait_event(finished)
    torch.get_device_module(device).synchronize() if hasattr(torch.get_device_module(device), "synchronize") else None
    return [z.cpu(), y.cpu(), bool(finished.query())]


def _synchronize(x: torch.Tensor, device: str) -> list[Any]:
    stream = torch.Stream(device=device)
    with stream:
        a = x.to(device)
        y = a * 2 + 1
        z = (y * y).sum()
    stream.synchronize()
    current = torch.accelerator.current_accelerator()
    if current is None or current.type != torch.device(device).type:
        raise RuntimeError(f"torch.accelerator does not support {device}: it is not this process's accelerator.")
    torch.accelerator.synchronize(torch.device(device))
    return [z.cpu(), y.cpu(), bool(stream.query())]


def _event_timing(x: torch.Tensor, device: str) -> list[Any]:
    stream = torch.Stream(device=device)
    start, end = torch.Event(device=device, enable_timing=True), torch.Event(device=device, enable_timing=True)
    with stream:
        start.record(stream)
        a = x.to(device)
        y = a * 2 + 1
        z = (y * y).sum()
        end.record(stream)
    end.synchronize()
    elapsed = start.elapsed_time(end)
    if not (elapsed >= 0):
        raise RuntimeError(f"elapsed_time between ordered events is {elapsed}, not >= 0")
    return [z.cpu(), y.cpu(), bool(end.query())]


def _device_module(x: torch.Tensor, device: str) -> list[Any]:
    module = torch.get_device_module(device)
    side = module.Stream()
    a = x.to(device)
    side.wait_stream(module.current_stream())
    with module.stream(side):
        y = a * 2 + 1
        event = module.Event()
        event.record(side)
    module.current_stream().wait_event(event)
    z = (y * y).sum()
    module.synchronize()
    return [z.cpu(), y.cpu(), bool(event.query())]


CHECKS = {"order": _order, "synchronize": _synchronize, "event_timing": _event_timing, "device_module": _device_module}


def run_item(item: WorkItem, rctx: Any) -> Result:
    check = CHECKS[item.subject.split(".", 1)[1]]
    x = _inputs(rctx.seed + rctx.rank)
    return judge(item, rctx.adapter, lambda: _expected(x), lambda: check(x, rctx.device),
                 lambda: _expected(x.double()))
