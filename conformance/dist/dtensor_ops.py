"""DTensor OpInfo: PyTorch's OpInfo samples run through DTensor on a 1-D DeviceMesh of the
world, each tensor input placed one way, and the `full_tensor()` of every output compared with
the plain CPU op by the numerics rule.

An item is ("dist", "dtensor.<OpInfo full name>", placement, dtype, "eager"), placement one of:

    shard0     every input with a dimension is Shard(0) (uneven shards included), scalars Replicate
    replicate  every input Replicate
    partial    the first floating/integer input Partial(sum): rank 0 holds it, the others zeros
               (its sum is the tensor, exactly); the rest Replicate

Everything but the device run is the OpInfo suite's own (conformance/opinfo/run.py and
steps.py: samples, CPU reference, float64 oracle, tolerance overrides, folding into a Result
through conformance/outcome.py); this module supplies the device run. A sharding-propagation
failure (DTensor has no rule for the op and placements) is UNSUPPORTED, reported as DTensor's;
the collectives DTensor issued to redistribute inputs, and the outputs' placements, are recorded
in the result's `extra` (`redistribution`, `output_placements`).
"""

from __future__ import annotations

import collections
import dataclasses
import traceback
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.engine.config import WorkerContext
from conformance.planning import OpsOptions
from conformance.dist.plan import DTENSOR_PREFIX as PREFIX
from conformance.dist.plan import DistOptions
from op_db.records import Result, Status, WorkItem

_OPINFO_STATE = "opinfo"
_MESH_STATE = "dtensor-mesh"
_PROPAGATION_SOURCES = ("torch/distributed/tensor/_sharding_prop.py", "torch/distributed/tensor/_ops/")
_PROPAGATION_MARKERS = ("Sharding propagation failed", "does not have a sharding strategy")


class ShardingPropagationError(NotImplementedError):
    """DTensor found no sharding for the op and these placements (its gap, not the backend's)."""


@dataclasses.dataclass
class DTensorRecord:
    """What the DTensor runs of one item did besides computing: placed samples, collectives,
    output placements."""

    placed: int = 0
    collectives: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    output_placements: set[str] = dataclasses.field(default_factory=set)
    propagation_failures: int = 0

    def extra(self) -> dict[str, Any]:
        return {"placed_samples": self.placed, "redistribution": dict(sorted(self.collectives.items())),
                "output_placements": sorted(self.output_placements),
                "sharding_propagation": "failed" if self.propagation_failures else "ok"}


def _placement(kind: str, t: torch.Tensor, first: bool) -> Any:
    from torch.distributed.tensor import Partial, Replicate, Shard

    if kind == "shard0" and t.dim() >= 1:
        return Shard(0)
    if kind == "partial" and first and t.dtype != torch.bool and not t.dtype.is_complex:
        return Partial("sum")
    return Replicate()


def distribute(kind: str, mesh: Any, args: Any, record: DTensorRecord) -> Any:
    """The (args, kwargs) tree with every plain tensor made a DTensor placed by `kind`."""
    from torch.distributed.tensor import DTensor, Partial, Replicate, distribute_tensor

    placed_any = False
    firsts = iter([True])

    def place(value: Any) -> Any:
        nonlocal placed_any
        if not isinstance(value, torch.Tensor) or value.layout != torch.strided:
            return value
        placement = _placement(kind, value, next(firsts, False))
        if not isinstance(placement, Replicate) or kind == "replicate":
            placed_any = True
        if isinstance(placement, Partial):
            local = value if mesh.get_local_rank() == 0 else torch.zeros_like(value)
            return DTensor.from_local(local, mesh, [placement], run_check=False)
        return distribute_tensor(value.detach(), mesh, [placement]).requires_grad_(value.requires_grad)

    placed = pytree.tree_map(place, args)
    record.placed += int(placed_any)
    return placed


def _from_propagation(exc: BaseException | None) -> bool:
    """Did DTensor's sharding propagation raise this (or what it wraps)? Local kernels run
    outside those modules, so a backend's own failure is not mistaken for one."""
    while exc is not None:
        if any(marker in str(exc) for marker in _PROPAGATION_MARKERS):
            return True
        frames = traceback.extract_tb(exc.__traceback__)
        if any(any(src in frame.filename for src in _PROPAGATION_SOURCES) for frame in frames):
            return True
        exc = exc.__cause__
    return False


def _gather(value: Any, record: DTensorRecord) -> Any:
    from torch.distributed.tensor import DTensor

    if isinstance(value, DTensor):
        record.output_placements.add(",".join(str(p) for p in value.placements))
        return value.full_tensor()
    return value


def dtensor_runner(kind: str, mesh: Any, record: DTensorRecord):
    """`device_fn` for conformance.opinfo.run.run_item: the op on DTensor inputs, full outputs."""
    def for_setup(setup: Any):
        def run(*args: Any, **kwargs: Any) -> Any:
            from torch.distributed.tensor.debug import CommDebugMode

            dargs, dkwargs = distribute(kind, mesh, (args, kwargs), record)
            comms = CommDebugMode()
            try:
                with comms:
                    out = setup.op(*dargs, **dkwargs)
            except Exception as exc:
                if _from_propagation(exc):
                    record.propagation_failures += 1
                    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    raise ShardingPropagationError(
                        f"DTensor does not support {kind} inputs for {setup.op.full_name}: sharding "
                        f"propagation failed ({type(exc).__name__}: {first_line})") from exc
                raise
            finally:
                record.collectives.update({str(op).rsplit(".", 1)[-1]: n for op, n in comms.get_comm_counts().items()})
            return pytree.tree_map(lambda v: _gather(v, record), out)
        return run
    return for_setup


def _mesh(rctx: Any) -> Any:
    if _MESH_STATE not in rctx.state:
        from torch.distributed.device_mesh import init_device_mesh

        rctx.state[_MESH_STATE] = init_device_mesh(rctx.device.split(":", 1)[0], (rctx.world_size,))
    return rctx.state[_MESH_STATE]


def _opinfo_context(rctx: Any) -> WorkerContext:
    """The OpInfo suite's worker context for this rank: its op database and the dist run's
    sample limit."""
    if _OPINFO_STATE not in rctx.state:
        from torch.testing._internal.common_methods_invocations import op_db

        from conformance.opinfo.run import _skip_test_case_lookup

        _skip_test_case_lookup()
        rctx.state[_OPINFO_STATE] = {op.full_name: op for op in op_db}

    max_samples = rctx.config.options_of(DistOptions).max_samples
    config = rctx.config.with_(device=rctx.device, suite_options=OpsOptions(max_samples=max_samples))
    return WorkerContext(config=config, adapter=rctx.adapter, state=rctx.state)


def run_item(item: WorkItem, rctx: Any) -> Result:
    """One rank's verdict on a DTensor OpInfo item (rctx: conformance.dist.rank.RankContext)."""
    from conformance.opinfo import run as opinfo_run

    record = DTensorRecord()
    result = opinfo_run.run_item(item, _opinfo_context(rctx), subject=item.subject.removeprefix(PREFIX),
                                 device_fn=dtensor_runner(item.variant, _mesh(rctx), record))
    result.extra = {**result.extra, **record.extra()}
    if record.placed == 0 and result.status in (Status.PASS, Status.FALLBACK):
        return Result.for_item(item, Status.SKIP, samples=result.samples, extra=result.extra,
                               message=f"no sample has an input that can be placed {item.variant}.")
    return result
