"""Kernels accelerators have and the CPU lacks, that real code relies on.

One table serves twice: as the sim device's kernels for these ops (sim/fallback.py), and as the
CPU's stand-in wherever the checker reruns a device's recorded calls on the CPU (replay.py,
primitives.py: `run_on_cpu`), so that a backend's call of one of them is judged against its
semantics instead of making the rerun unavailable.

* `histc` on integer dtypes: Transformers' grouped-matmul MoE path calls it on int32 tensors on
  every non-CPU device; CUDA's histc takes integers.
* The fused LSTM and GRU cells ATen sends only to accelerators (fused_rnn_cells.py).
* Antialiased resizing in bfloat16/float16, which models call on accelerators and upcast for
  only on the CPU (Cosmos 3 Edge's vision tower).

Keys are `str(OpOverload)`, as the recorder and the sim fallback name ops.
"""

from __future__ import annotations

import torch

from conformance.reference.fused_rnn_cells import KERNELS as FUSED_RNN_CELL_KERNELS

_HALF = (torch.bfloat16, torch.float16)


def histc_any_dtype(func, args, kwargs):
    x = args[0]
    if x.is_floating_point():
        return func(*args, **kwargs)
    return func(x.double(), *args[1:], **kwargs).to(x.dtype)


def half_in_float32(func, args, kwargs):
    """`func` on bfloat16/float16 tensors computed in float32 and rounded once into the
    tensors' dtype, as a GPU kernel accumulates in float32 (`acc_type`)."""
    half = next((a.dtype for a in args if isinstance(a, torch.Tensor) and a.dtype in _HALF), None)
    if half is None:
        return func(*args, **kwargs)
    wide = [a.float() if isinstance(a, torch.Tensor) and a.dtype in _HALF else a for a in args]
    return func(*wide, **kwargs).to(half)


ACCELERATOR_KERNELS = {
    "aten.histc.default": histc_any_dtype,
    **{f"aten.{op}.default": half_in_float32 for op in (
        "_upsample_bilinear2d_aa", "_upsample_bilinear2d_aa_backward",
        "_upsample_bicubic2d_aa", "_upsample_bicubic2d_aa_backward")},
    **FUSED_RNN_CELL_KERNELS,
}


def run_on_cpu(func, args, kwargs):
    """`func` called on CPU tensors: the CPU's own kernel, or this table's where it has none."""
    kernel = ACCELERATOR_KERNELS.get(str(func))
    return func(*args, **kwargs) if kernel is None else kernel(func, args, kwargs)
