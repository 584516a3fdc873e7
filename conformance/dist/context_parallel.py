"""Context-parallel SDPA parity (`parity.cp_sdpa`): causal scaled-dot-product attention with the
sequence split over the world by `torch.distributed.tensor.experimental.context_parallel`
(ring attention, PyTorch's head-tail load balancing), against the same attention in one CPU
process.

Every rank makes the same seeded query, key, value and loss weight (batch, heads, sequence,
head size); `context_parallel` shards them in place along the sequence; each rank attends with
its shard, and backpropagates sum(out * weight) through the ring. The output and the query, key
and value gradients are gathered back in sequence order (`context_parallel_unshard`) and judged
by the numerics rule against `F.scaled_dot_product_attention` of the whole tensors on the CPU,
with a float64 oracle.

PyTorch's ring attention exists only for the flash, memory-efficient and cuDNN SDPA kernels
(RING_KERNELS). Which kernel the device's SDPA takes is measured first, by running it once on the
device under a dispatch mode that records the aten ops. A device whose SDPA takes another one
cannot be context-parallel, and PyTorch fails it in its own words, which the item keeps: UNSUPPORTED,
naming the kernel the device used. Measured with torch 2.13: sim's SDPA takes the math path (a
composite whose causal mask meets the sharded DTensors: "aten.add.Tensor got mixed torch.Tensor
and DTensor"); the CPU's takes aten._scaled_dot_product_flash_attention_for_cpu ("does not have a
sharding strategy registered"). A device that has a ring kernel and still fails is judged as any
failure is (outcome.py).
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F

from conformance.dist.judge import from_comparison
from conformance.numerics import compare
from conformance.outcome import classify_exception, describe_exception
from op_db.records import Result, Status, WorkItem, shorten

BATCH, HEADS, HEAD_SIZE = 2, 2, 8
SEQ_PER_RANK = 8  # a multiple of 2: the head-tail balancer gives each rank two halves
OUTPUTS = ("output", "query gradient", "key gradient", "value gradient")
RING_KERNELS = ("aten._scaled_dot_product_flash_attention.default",
                "aten._scaled_dot_product_efficient_attention.default",
                "aten._scaled_dot_product_cudnn_attention.default")
SDPA_KERNELS = RING_KERNELS + ("aten._scaled_dot_product_flash_attention_for_cpu.default",
                               "aten._scaled_dot_product_fused_attention_overrideable.default")


def sdpa_kernel(device: str, dtype: torch.dtype) -> str:
    """The fused SDPA kernel causal attention takes on `device`, or "math" (the composite)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[str] = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    query = torch.zeros(1, 1, 4, HEAD_SIZE, dtype=dtype, device=device)
    with Recorder():
        F.scaled_dot_product_attention(query, query, query, is_causal=True)
    return next((op for op in seen if op in SDPA_KERNELS), "math")


def inputs(seed: int, sequence: int, dtype: torch.dtype) -> list[torch.Tensor]:
    """Query, key, value and the loss weight, the same on every rank."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(BATCH, HEADS, sequence, HEAD_SIZE, generator=gen).to(dtype) for _ in range(4)]


def attend(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, weight: torch.Tensor) -> list[torch.Tensor]:
    """Causal SDPA of leaf copies and the gradients of sum(out * weight): [out, dq, dk, dv]."""
    leaves = [t.detach().clone().requires_grad_() for t in (query, key, value)]
    out = F.scaled_dot_product_attention(*leaves, is_causal=True)
    (out * weight).sum().backward()
    return [out.detach(), *(leaf.grad for leaf in leaves)]


def reference(tensors: list[torch.Tensor], dtype: torch.dtype) -> list[torch.Tensor]:
    return attend(*(t.to(dtype) for t in tensors))


def on_device(tensors: list[torch.Tensor], rctx: Any) -> list[torch.Tensor]:
    """The ring attention of the sequence split over the world, gathered back in order."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel
    from torch.distributed.tensor.experimental._attention import context_parallel_unshard

    mesh = init_device_mesh(rctx.device.split(":", 1)[0], (rctx.world_size,))
    buffers = [t.to(rctx.device) for t in tensors]
    dims = [2] * len(buffers)
    with context_parallel(mesh, buffers=buffers, buffer_seq_dims=dims, no_restore_buffers=set(buffers)):
        pieces = attend(*buffers)
        whole = context_parallel_unshard(mesh, pieces, dims)
    return [t.detach().cpu() for t in whole]


def run_item(item: WorkItem, rctx: Any) -> Result:
    started = time.perf_counter()
    if rctx.world_size < 2:
        return Result.for_item(item, Status.SKIP, message="context parallel needs a world of 2 ranks or more.")
    dtype = getattr(torch, item.dtype)
    tensors = inputs(rctx.seed, SEQ_PER_RANK * rctx.world_size, dtype)
    try:
        ref = reference(tensors, dtype)
        hi = reference(tensors, torch.float64)
    except Exception as exc:  # noqa: BLE001 - the CPU itself failed: says nothing about the backend
        return Result.for_item(item, Status.REF_ERROR, message=shorten(describe_exception(exc)))
    with rctx.adapter.track_fallbacks() as fallbacks:
        try:
            dev = on_device(tensors, rctx)
            rctx.adapter.synchronize()
        except Exception as exc:  # noqa: BLE001 - the backend (or PyTorch's CP for it) failed
            return failure(item, exc, rctx, dtype, started)
    return judge(item, dev, ref, hi, sorted(fallbacks.ops), started)


def judge(item: WorkItem, dev: list[torch.Tensor], ref: list[torch.Tensor], hi: list[torch.Tensor],
          fallback_ops: list[str], started: float) -> Result:
    """The numerics rule over the output and each gradient; `divergence` names the first failing."""
    comparison, divergence = None, None
    for name, got, want, oracle in zip(OUTPUTS, dev, ref, hi):
        step = compare(got, want, oracle)
        if not step.ok and divergence is None:
            divergence = name
            step.reason = f"{name}: {step.reason}"
        comparison = step if comparison is None else comparison.merge(step)
    return from_comparison(item, comparison, fallback_ops, time.perf_counter() - started, divergence=divergence)


def failure(item: WorkItem, exc: BaseException, rctx: Any, dtype: torch.dtype, started: float) -> Result:
    """UNSUPPORTED where the device's SDPA kernel has no ring attention; else as outcome.py says."""
    status, text, extra = classify_exception(exc), describe_exception(exc), {}
    try:
        kernel = sdpa_kernel(rctx.device, dtype)
    except Exception:  # noqa: BLE001 - SDPA itself fails on the device: the failure speaks alone
        kernel = None
    if kernel is not None and kernel not in RING_KERNELS:
        status, extra = Status.UNSUPPORTED, {"sdpa_kernel": kernel}
        text = (f"PyTorch's context parallel has ring attention only for the flash, memory-efficient and cuDNN "
                f"SDPA kernels; SDPA on {rctx.device} takes "
                f"{'the math path (no fused kernel)' if kernel == 'math' else kernel}: {text}")
    return Result.for_item(item, status, samples=1, duration_s=time.perf_counter() - started, extra=extra,
                           message=shorten(f"context parallel SDPA: {text}"))
