"""The collectives catalogue: c10d collectives x layouts, each checked against gloo on CPU.

An item is ("dist", "all_reduce.sum", "odd", "bfloat16", "eager"). Every rank regenerates
every rank's inputs from (item, rank) seeds, so it can compute the float64 oracle of its own
outputs directly; the reference is the same collective run by gloo on CPU copies of the inputs
(or, where gloo lacks the operation, the oracle rounded to the dtype).
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from conformance.dist.judge import judge
from op_db.records import Result, Status, WorkItem

# Layout of the inputs, by variant: logical shape per rank and how it sits in memory.
SHAPES = {"contig": (64,), "odd": (37,), "noncontig": (6, 8), "empty": (0,), "async": (64,), "uneven": (5,)}
ALL_LAYOUTS = ("contig", "odd", "noncontig", "empty", "async")
FLAT_LAYOUTS = ("contig", "odd", "empty", "async")
NO_DTYPE = "none"


@dataclasses.dataclass
class Call:
    """One rank's view of one collective item."""

    item: WorkItem
    rank: int
    world: int
    dtype: torch.dtype
    seed: int

    @property
    def variant(self) -> str:
        return self.item.variant

    @property
    def async_op(self) -> bool:
        return self.variant == "async"

    def inputs(self, shape: tuple[int, ...] | None = None) -> list[torch.Tensor]:
        """Every rank's input, on CPU in the item's dtype, the same on every rank."""
        shape = shape or SHAPES[self.variant]
        out = []
        for rank in range(self.world):
            gen = torch.Generator().manual_seed(zlib.crc32(f"{self.item.test_id}|{rank}".encode()) + self.seed)
            values = torch.randn(shape, generator=gen, dtype=torch.float32)
            if self.item.subject == "all_reduce.product":
                values = 1 + values / 8  # a product of N stays in range
            out.append(values.to(self.dtype))
        return out

    def layout(self, t: torch.Tensor) -> torch.Tensor:
        """The tensor as the variant lays it out (a transposed view for noncontig)."""
        return t.t() if self.variant == "noncontig" else t

    def finish(self, work: Any) -> None:
        if self.async_op:
            work.wait()


@dataclasses.dataclass(frozen=True)
class Collective:
    """`run(call, inputs, place, group)` performs the collective on this rank's tensors (made by
    `place`: to the device, or CPU copies) and returns its outputs; `oracle(call, inputs)` is
    what they must be, in float64."""

    name: str
    run: Callable[..., Any]
    oracle: Callable[[Call, list[torch.Tensor]], Any]
    variants: tuple[str, ...]
    gloo_reference: bool = True  # False: gloo lacks it; the reference is the oracle in the dtype
    min_world: int = 1


def _hi(t: torch.Tensor) -> torch.Tensor:
    return t.double()


def _reduce(op_name: str) -> Callable[[Call, list[torch.Tensor]], torch.Tensor]:
    def oracle(call: Call, inputs: list[torch.Tensor]) -> torch.Tensor:
        stack = torch.stack([call.layout(_hi(x)) for x in inputs])
        if op_name == "sum":
            return stack.sum(0)
        if op_name == "avg":
            return stack.mean(0)
        if op_name == "product":
            return stack.prod(0)
        return stack.amax(0) if op_name == "max" else stack.amin(0)
    return oracle


_REDUCE_OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX,
               "min": dist.ReduceOp.MIN, "product": dist.ReduceOp.PRODUCT}


def _all_reduce(op_name: str):
    def run(call, inputs, place, group):
        t = call.layout(place(inputs[call.rank]))
        call.finish(dist.all_reduce(t, op=_REDUCE_OPS[op_name], group=group, async_op=call.async_op))
        return t
    return run


def _all_gather(call, inputs, place, group):
    mine = call.layout(place(inputs[call.rank]))
    outs = [torch.empty_like(mine, memory_format=torch.contiguous_format) for _ in range(call.world)]
    call.finish(dist.all_gather(outs, mine, group=group, async_op=call.async_op))
    return outs


def _all_gather_into_tensor(call, inputs, place, group):
    mine = place(inputs[call.rank])
    out = torch.empty((call.world * mine.numel(),), dtype=mine.dtype, device=mine.device)
    call.finish(dist.all_gather_into_tensor(out, mine, group=group, async_op=call.async_op))
    return out


def _chunks(call: Call) -> tuple[int, ...]:
    """Per-rank input of the reduce-scatters: one row for each destination rank."""
    return (call.world, *SHAPES[call.variant])


def _reduce_scatter(call, inputs, place, group):
    rows = [place(row) for row in inputs[call.rank]]
    out = torch.empty_like(rows[0]) if rows else None
    call.finish(dist.reduce_scatter(out, rows, group=group, async_op=call.async_op))
    return out


def _reduce_scatter_tensor(call, inputs, place, group):
    mine = place(inputs[call.rank]).reshape(-1)
    out = torch.empty((mine.numel() // call.world,), dtype=mine.dtype, device=mine.device)
    call.finish(dist.reduce_scatter_tensor(out, mine, group=group, async_op=call.async_op))
    return out


def _scatter_oracle(call, inputs):
    return torch.stack([_hi(x)[call.rank] for x in inputs]).sum(0).reshape(-1)


def _broadcast(call, inputs, place, group):
    t = call.layout(place(inputs[call.rank]))
    call.finish(dist.broadcast(t, src=0, group=group, async_op=call.async_op))
    return t


def _splits(call: Call, src: int) -> list[int]:
    """Elements rank `src` sends to each rank: uneven sizes for `uneven`, equal otherwise."""
    base = SHAPES[call.variant][0]
    if call.variant == "uneven":
        return [1 + (src + 2 * dst) % 3 for dst in range(call.world)]
    return [base] * call.world


def _a2a_inputs(call: Call) -> list[torch.Tensor]:
    flat = call.inputs((call.world * 3 * max(SHAPES[call.variant][0], 1),))
    return [flat[src][: sum(_splits(call, src))] for src in range(call.world)]


def _a2a_oracle(call, _inputs):
    inputs = _a2a_inputs(call)
    return [_hi(inputs[src]).split(_splits(call, src))[call.rank] for src in range(call.world)]


def _all_to_all(call, _inputs, place, group):
    inputs = _a2a_inputs(call)
    sends = [place(p) for p in inputs[call.rank].split(_splits(call, call.rank))]
    dev = sends[0].device
    outs = [torch.empty((_splits(call, src)[call.rank],), dtype=call.dtype, device=dev) for src in range(call.world)]
    call.finish(dist.all_to_all(outs, sends, group=group, async_op=call.async_op))
    return outs


def _all_to_all_single(call, _inputs, place, group):
    inputs = _a2a_inputs(call)
    mine = place(inputs[call.rank])
    received = [_splits(call, src)[call.rank] for src in range(call.world)]
    out = torch.empty((sum(received),), dtype=call.dtype, device=mine.device)
    call.finish(dist.all_to_all_single(out, mine, received, _splits(call, call.rank), group=group,
                                       async_op=call.async_op))
    return list(out.split(received))


def _send_recv(call, inputs, place, group):
    """A ring: each rank sends its input to the next and receives the previous rank's."""
    mine = place(inputs[call.rank])
    out = torch.empty_like(mine)
    ranks = dist.get_process_group_ranks(group)
    send = dist.isend(mine, ranks[(call.rank + 1) % call.world], group=group)
    recv = dist.irecv(out, ranks[(call.rank - 1) % call.world], group=group)
    send.wait()
    recv.wait()
    return out


def _barrier(call, _inputs, _place, group):
    work = dist.barrier(group=group, async_op=call.async_op)
    if call.async_op:
        work.wait()
    return True


CATALOGUE: dict[str, Collective] = {c.name: c for c in (
    *(Collective(f"all_reduce.{op}", _all_reduce(op), _reduce(op), ALL_LAYOUTS, gloo_reference=op != "avg")
      for op in _REDUCE_OPS),
    Collective("all_gather", _all_gather, lambda call, xs: [call.layout(_hi(x)) for x in xs], ALL_LAYOUTS),
    Collective("all_gather_into_tensor", _all_gather_into_tensor,
               lambda call, xs: torch.cat([_hi(x).reshape(-1) for x in xs]), FLAT_LAYOUTS),
    Collective("reduce_scatter", _reduce_scatter, _scatter_oracle, FLAT_LAYOUTS),
    Collective("reduce_scatter_tensor", _reduce_scatter_tensor, _scatter_oracle, FLAT_LAYOUTS),
    Collective("broadcast", _broadcast, lambda call, xs: call.layout(_hi(xs[0])), ALL_LAYOUTS),
    # gloo's list all_to_all takes equal sizes only; uneven splits are all_to_all_single's.
    Collective("all_to_all", _all_to_all, _a2a_oracle, ("contig", "async")),
    Collective("all_to_all_single", _all_to_all_single, _a2a_oracle, ("contig", "uneven", "async")),
    Collective("send_recv", _send_recv, lambda call, xs: _hi(xs[(call.rank - 1) % call.world]), ("contig", "odd"),
               min_world=2),
    Collective("barrier", _barrier, lambda call, xs: True, ("contig", "async")),
)}
# Collectives that move no data are planned once, with no dtype.
DTYPELESS = frozenset({"barrier"})


def inputs_for(spec: Collective, call: Call) -> list[torch.Tensor]:
    if spec.name.startswith("reduce_scatter"):
        return call.inputs(_chunks(call))
    if spec.name in DTYPELESS:
        return []
    return call.inputs()


def run_item(item: WorkItem, rctx: Any) -> Result:
    """One rank's verdict on a collective item (rctx: conformance.dist.rank.RankContext)."""
    spec = CATALOGUE[item.subject]
    if rctx.world_size < spec.min_world:
        return Result.for_item(item, Status.SKIP, message=f"{spec.name} needs at least {spec.min_world} ranks.")
    dtype = torch.float32 if item.dtype == NO_DTYPE else getattr(torch, item.dtype)
    call = Call(item, rctx.rank, rctx.world_size, dtype, rctx.seed)
    inputs = inputs_for(spec, call)

    def reference():
        if not spec.gloo_reference:
            return _round(spec.oracle(call, inputs), dtype)
        return spec.run(call, inputs, lambda t: t.clone(), rctx.cpu_group)

    return judge(item, rctx.adapter, reference, lambda: spec.run(call, inputs, lambda t: t.to(rctx.device), None),
                 lambda: spec.oracle(call, inputs))


def _round(value: Any, dtype: torch.dtype) -> Any:
    if isinstance(value, list):
        return [_round(v, dtype) for v in value]
    return value.to(dtype) if isinstance(value, torch.Tensor) else value
