"""The op recorder sees inside a wrapper tensor subclass's own dispatch when asked to."""

from __future__ import annotations

import pytest
import torch

from conformance.reference.oprecord import OpRecorder


class AddmmWeight(torch.Tensor):
    """A wrapper subclass that runs the aten.mm it receives as an aten.addmm on its inner tensor,
    as torchao's quantized tensors run their own kernels."""

    @staticmethod
    def __new__(cls, inner: torch.Tensor):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)

    def __init__(self, inner: torch.Tensor):
        self.inner = inner

    def __tensor_flatten__(self):
        return ["inner"], None

    @staticmethod
    def __tensor_unflatten__(inner_tensors, meta, outer_size, outer_stride):
        return AddmmWeight(inner_tensors["inner"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        plain = [a.inner if isinstance(a, AddmmWeight) else a for a in args]
        if func is torch.ops.aten.mm.default:
            return torch.ops.aten.addmm.default(torch.zeros(()), *plain)
        if func is torch.ops.aten.sin.default:
            raise NotImplementedError("no sin for this kernel")
        return func(*plain, **(kwargs or {}))


@pytest.mark.parametrize("into_subclasses, seen, unseen", [
    (True, "aten.addmm.default", "aten.mm.default"),  # what reaches the backend
    (False, "aten.mm.default", "aten.addmm.default"),  # the op the subclass received
])
def test_ops_a_subclass_issues_are_recorded_when_asked(into_subclasses, seen, unseen):
    x, weight = torch.ones(2, 3), AddmmWeight(torch.full((3, 4), 2.0))
    with OpRecorder("cpu", into_subclasses=into_subclasses) as recorder:
        out = torch.mm(x, weight)
    assert torch.equal(out, torch.full((2, 4), 6.0))
    assert recorder.ops[seen] == 1 and unseen not in recorder.ops


def test_a_failure_inside_the_subclass_names_the_op_it_received_when_nothing_ran():
    with OpRecorder("cpu", into_subclasses=True) as recorder, pytest.raises(NotImplementedError):
        torch.sin(AddmmWeight(torch.ones(2)))
    assert recorder.failing_op == "aten.sin.default"
