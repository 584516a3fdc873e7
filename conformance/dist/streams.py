"""Streams and events on the backend, through torch.accelerator and the device-generic API.

Each check enqueues work whose right answer depends on the ordering it tests, so a backend
that ignores a wait or a record shows a wrong value (MISMATCH), and one that lacks the API
raises (UNSUPPORTED/ERROR through conformance/outcome.py):

* order: work on a side stream, an event recorded there, the current stream waiting on the
  event, then dependent work on the current stream; `Event.query()` after a wait;
* synchronize: `Stream.synchronize()` and `torch.accelerator.synchronize()`, `Stream.query()`
  after them;
* event_timing: timing events recorded around work on a stream, `Event.synchronize()`,
  `Event.query()` and `elapsed_time` between them (a backend whose device guard has no
  event synchronisation or timing raises here, and only here), which must agree with the host's
  clock (`timing_agrees`);
* cross_stream: work recorded on one stream and waited for on another (`Stream.wait_event`),
  with its timing events judged against the host's clock the same way;
* device_module: the same ordering through `torch.get_device_module(device)` (Stream, Event,
  current_stream, stream(...)), the API FSDP2 and DDP use.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from conformance.dist.judge import judge
from op_db.records import Result, WorkItem

SIZE = 4096
# The host pause between two timing events: an idle device records the second one no earlier.
PAUSE_S = 0.02


def _inputs(seed: int) -> torch.Tensor:
    return torch.randn(SIZE, generator=torch.Generator().manual_seed(seed))


def _expected(x: torch.Tensor) -> list[Any]:
    y = x * 2 + 1
    return [(y * y).sum(), y, True]


def _expected_timed(x: torch.Tensor) -> list[Any]:
    return [*_expected(x), True]


def timing_agrees(elapsed_ms: float, pause_s: float, window_s: float) -> bool:
    """Does a device's `elapsed_time` fit the host's clock? Two events recorded on an idle
    device (synchronised first) `pause_s` apart by the host cannot be much less than the pause
    apart, nor more than the host's whole window around them (slack: 1 ms, 10%)."""
    low = pause_s * 1e3 * 0.9 - 1.0
    high = window_s * 1e3 * 1.1 + 1.0
    return low <= elapsed_ms <= high


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
    torch.accelerator.synchronize(torch.device(device))
    began = time.perf_counter()
    with stream:
        start.record(stream)
        a = x.to(device)
        y = a * 2 + 1
        z = (y * y).sum()
        time.sleep(PAUSE_S)
        end.record(stream)
    end.synchronize()
    window = time.perf_counter() - began
    elapsed = start.elapsed_time(end)
    return [z.cpu(), y.cpu(), bool(end.query()), timing_agrees(elapsed, PAUSE_S, window)]


def _cross_stream(x: torch.Tensor, device: str) -> list[Any]:
    producer, consumer = torch.Stream(device=device), torch.Stream(device=device)
    current = torch.accelerator.current_stream(torch.device(device))
    a = x.to(device)
    torch.accelerator.synchronize(torch.device(device))
    began = time.perf_counter()
    start = torch.Event(device=device, enable_timing=True)
    done = torch.Event(device=device, enable_timing=True)
    producer.wait_stream(current)  # `a` was made on the current stream
    with producer:
        start.record(producer)
        y = a * 2 + 1
        time.sleep(PAUSE_S)
        done.record(producer)
    consumer.wait_event(done)
    with consumer:
        z = (y * y).sum()
        finished = consumer.record_event()
    current.wait_event(finished)
    finished.synchronize()
    window = time.perf_counter() - began
    return [z.cpu(), y.cpu(), bool(done.query() and finished.query()),
            timing_agrees(start.elapsed_time(done), PAUSE_S, window)]


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


CHECKS = {"order": _order, "synchronize": _synchronize, "event_timing": _event_timing,
          "cross_stream": _cross_stream, "device_module": _device_module}
TIMED = frozenset({"event_timing", "cross_stream"})


def run_item(item: WorkItem, rctx: Any) -> Result:
    name = item.subject.split(".", 1)[1]
    check = CHECKS[name]
    expected = _expected_timed if name in TIMED else _expected
    x = _inputs(rctx.seed + rctx.rank)
    return judge(item, rctx.adapter, lambda: expected(x), lambda: check(x, rctx.device),
                 lambda: expected(x.double()))
