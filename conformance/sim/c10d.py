"""The sim c10d backend: torch.distributed over gloo for `sim` tensors, with `collective_faults`.

`register()` makes ``dist.init_process_group(backend="sim")`` work. The process group is a
Python `dist.ProcessGroup` that owns a gloo group on a prefixed copy of the same store. Every
collective hands gloo CPU views of the sim tensors' memory (gloo writes into that memory), runs gloo, and returns a `SimWork` whose `wait()` (or future)
applies the active profile's `collective_faults` to this rank's outputs: a wrong, hung,
raising or dead rank, as a broken real backend would show it. A send or recv fault may name
its `peer`, breaking one link only; kind `unsupported` makes any collective refuse
with c10d's own "Backend sim does not support send" before anything is sent, as a backend
without the collective does (a pipeline needs point-to-point, MoE all_to_all, FSDP2
reduce_scatter_tensor).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d

from . import faults
from .faults import DEVICE
from op_db.sim_profile import CollectiveFault

BACKEND = "sim"


def _inner(t: Any) -> Any:
    """A CPU tensor over a sim tensor's memory, for gloo to read and write (CPU tensors pass through)."""
    if isinstance(t, torch.Tensor) and t.device.type == DEVICE:
        from .native import module

        return module().cpu_view(t)
    return t


def _inner_all(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_inner_all(v) for v in value]
    return _inner(value)


def _leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value] if isinstance(value, torch.Tensor) else []


def _dtype(outputs: list[torch.Tensor]) -> str | None:
    return faults.dtype_name(outputs[0].dtype) if outputs else None


def refuse_if_unsupported(collective: str, rank: int, peer: int | None = None) -> None:
    """c10d's error for a collective the backend lacks, where the profile says this one is."""
    profile = faults.active_profile()
    for fault in profile.collective_faults if profile is not None else ():
        if fault.kind == "unsupported" and fault.applies(collective, None, rank, peer):
            raise RuntimeError(f"Backend {BACKEND} does not support {collective}")


def _apply(fault: CollectiveFault, outputs: list[torch.Tensor]) -> None:
    faults.trip(fault)
    for t in outputs:
        faults.corrupt_in_place(_inner(t), fault)


class SimWork(dist.Work):
    """Waits for the gloo work, then applies this rank's faults to the outputs, once."""

    def __init__(self, inner: dist.Work, collective: str, outputs: Any, rank: int, divide_by: int = 1,
                 peer: int | None = None):
        super().__init__()
        self._peer = peer
        self._work = inner
        self._divide_by = divide_by
        self._collective = collective
        self._outputs = outputs
        self._rank = rank
        self._finished = False

    def _finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        if self._divide_by != 1:
            with torch.no_grad():
                for t in _leaves(self._outputs):
                    _inner(t).div_(self._divide_by)
        profile = faults.active_profile()
        if profile is None or not profile.collective_faults:
            return
        leaves = _leaves(self._outputs)
        dtype = _dtype(leaves)
        for fault in profile.collective_faults:
            if fault.kind != "unsupported" and fault.applies(self._collective, dtype, self._rank, self._peer):
                _apply(fault, leaves)

    def wait(self, timeout: timedelta | None = None) -> bool:
        self._work.wait()
        self._finish()
        return True

    def is_completed(self) -> bool:
        return self._work.is_completed()

    def is_success(self) -> bool:
        return self._work.is_success()

    def get_future(self) -> torch.futures.Future:
        future: torch.futures.Future = torch.futures.Future()

        def done(inner: torch.futures.Future) -> None:
            try:
                inner.value()
                self._finish()
            except Exception as exc:  # noqa: BLE001 - handed to whoever waits on the future
                future.set_exception(exc)
                return
            future.set_result(self._outputs)

        self._work.get_future().add_done_callback(done)
        return future


class _AllWork:
    """Several gloo works seen as one (what a coalesced collective returns)."""

    def __init__(self, works: list[dist.Work]):
        self._works = works

    def wait(self) -> bool:
        for work in self._works:
            work.wait()
        return True

    def is_completed(self) -> bool:
        return all(w.is_completed() for w in self._works)

    def is_success(self) -> bool:
        return all(w.is_success() for w in self._works)

    def get_future(self) -> torch.futures.Future:
        return torch.futures.collect_all([w.get_future() for w in self._works])


class SimProcessGroup(dist.ProcessGroup):
    """A process group for `sim` (and CPU) tensors, computed by an owned gloo group."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: timedelta, group_name: str):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        # Functional collectives (DTensor, FSDP2) find a group by its registered name.
        self._group_name = group_name
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("sim-gloo", store), rank, size, timeout)

    def _work(self, collective: str, inner: dist.Work, outputs: Any, averaged: bool = False,
              peer: int | None = None) -> SimWork:
        return SimWork(inner, collective, outputs, self._rank, self._size if averaged else 1, peer)

    @staticmethod
    def _summed(opts: Any) -> tuple[Any, bool]:
        """gloo has no AVG: sum, and divide when the work completes, as backends without it do."""
        if opts.reduceOp != dist.ReduceOp.AVG:
            return opts, False
        summed = type(opts)()
        summed.reduceOp = dist.ReduceOp.SUM
        summed.timeout = opts.timeout
        return summed, True

    def getBackendName(self) -> str:
        return BACKEND

    @property
    def group_name(self) -> str:
        return self._group_name

    def getGroupName(self) -> str:  # what C++ callers (the functional collectives) ask
        return self._group_name

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return self._rank

    def allreduce(self, tensors, opts=_c10d.AllreduceOptions()):
        refuse_if_unsupported("all_reduce", self._rank)
        opts, averaged = self._summed(opts)
        return self._work("all_reduce", self._gloo.allreduce(_inner_all(tensors), opts), tensors, averaged)

    def allreduce_coalesced(self, tensors, opts=_c10d.AllreduceCoalescedOptions()):
        refuse_if_unsupported("all_reduce", self._rank)
        return self._work("all_reduce", self._gloo.allreduce_coalesced(_inner_all(tensors), opts), tensors)

    def reduce(self, tensors, opts=_c10d.ReduceOptions()):
        refuse_if_unsupported("reduce", self._rank)
        return self._work("reduce", self._gloo.reduce(_inner_all(tensors), opts), tensors)

    def allgather(self, output_lists, inputs, opts=_c10d.AllgatherOptions()):
        refuse_if_unsupported("all_gather", self._rank)
        return self._work("all_gather", self._gloo.allgather(_inner_all(output_lists), _inner_all(inputs), opts),
                          output_lists)

    def _allgather_base(self, output, input, opts=_c10d.AllgatherOptions()):
        refuse_if_unsupported("all_gather_into_tensor", self._rank)
        return self._work("all_gather_into_tensor", self._gloo._allgather_base(_inner(output), _inner(input), opts),
                          [output])

    all_gather_single = _allgather_base

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=_c10d.AllgatherOptions()):
        refuse_if_unsupported("all_gather_into_tensor", self._rank)
        # gloo has no coalesced form: one collective per pair, waited on together.
        works = [self._gloo._allgather_base(_inner(o), _inner(i), opts) for o, i in zip(outputs, inputs)]
        return self._work("all_gather_into_tensor", _AllWork(works), outputs)

    def reduce_scatter(self, outputs, input_lists, opts=_c10d.ReduceScatterOptions()):
        refuse_if_unsupported("reduce_scatter", self._rank)
        opts, averaged = self._summed(opts)
        inner = self._gloo.reduce_scatter(_inner_all(outputs), _inner_all(input_lists), opts)
        return self._work("reduce_scatter", inner, outputs, averaged)

    def _reduce_scatter_base(self, output, input, opts=_c10d.ReduceScatterOptions()):
        refuse_if_unsupported("reduce_scatter_tensor", self._rank)
        opts, averaged = self._summed(opts)
        inner = self._gloo._reduce_scatter_base(_inner(output), _inner(input), opts)
        return self._work("reduce_scatter_tensor", inner, [output], averaged)

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=_c10d.ReduceScatterOptions()):
        refuse_if_unsupported("reduce_scatter_tensor", self._rank)
        opts, averaged = self._summed(opts)
        works = [self._gloo._reduce_scatter_base(_inner(o), _inner(i), opts) for o, i in zip(outputs, inputs)]
        return self._work("reduce_scatter_tensor", _AllWork(works), outputs, averaged)

    def alltoall(self, outputs, inputs, opts=_c10d.AllToAllOptions()):
        refuse_if_unsupported("all_to_all", self._rank)
        return self._work("all_to_all", self._gloo.alltoall(_inner_all(outputs), _inner_all(inputs), opts), outputs)

    def alltoall_base(self, output, input, output_splits, input_splits, opts=_c10d.AllToAllOptions()):
        refuse_if_unsupported("all_to_all_single", self._rank)
        inner = self._gloo.alltoall_base(_inner(output), _inner(input), output_splits, input_splits, opts)
        return self._work("all_to_all_single", inner, [output])

    all_to_all_single = alltoall_base

    def broadcast(self, tensors, opts=_c10d.BroadcastOptions()):
        refuse_if_unsupported("broadcast", self._rank)
        return self._work("broadcast", self._gloo.broadcast(_inner_all(tensors), opts), tensors)

    def gather(self, output_lists, inputs, opts=_c10d.GatherOptions()):
        refuse_if_unsupported("gather", self._rank)
        return self._work("gather", self._gloo.gather(_inner_all(output_lists), _inner_all(inputs), opts),
                          output_lists)

    def scatter(self, outputs, input_lists, opts=_c10d.ScatterOptions()):
        refuse_if_unsupported("scatter", self._rank)
        return self._work("scatter", self._gloo.scatter(_inner_all(outputs), _inner_all(input_lists), opts), outputs)

    def send(self, tensors, dst, tag=0):
        refuse_if_unsupported("send", self._rank, dst)
        return self._work("send", self._gloo.send(_inner_all(tensors), dst, tag), [], peer=dst)

    def recv(self, tensors, src, tag=0):
        refuse_if_unsupported("recv", self._rank, src)
        return self._work("recv", self._gloo.recv(_inner_all(tensors), src, tag), tensors, peer=src)

    def barrier(self, opts=_c10d.BarrierOptions()):
        refuse_if_unsupported("barrier", self._rank)
        return self._work("barrier", self._gloo.barrier(opts), [])


def create_process_group(options: Any, _backend_options: Any = None) -> SimProcessGroup:
    """c10d's extended creator API: `options` carries the store, rank, size, timeout and group name."""
    return SimProcessGroup(options.store, options.group_rank, options.group_size, options.timeout, options.group_id)


def register() -> None:
    """Register the `sim` c10d backend for sim and CPU tensors (idempotent)."""
    if BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, create_process_group, extended_api=True, devices=[DEVICE, "cpu"])
