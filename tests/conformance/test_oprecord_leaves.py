"""The op recorder's own walk of an aten call's arguments finds what pytree finds, in order."""

from __future__ import annotations

import collections

import pytest
import torch
from torch.utils import _pytree as pytree

from conformance.reference.oprecord import call_leaves, op_name

Pair = collections.namedtuple("Pair", "first second")
T = torch.ones(2)

CALLS = {
    "flat": ((T, 2.0, None), {}),
    "tensor list with holes (aten.index)": ((T, [None, T]), {}),
    "sizes and kwargs": ((T, torch.Size([2, 3])), {"dtype": torch.float32, "out": T}),
    "namedtuple and nested dict": ((Pair(T, [T]), {"z": 1, "a": (T, [T])}), {}),
    "no arguments": ((), {}),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_call_leaves_are_pytrees_leaves(name):
    args, kwargs = CALLS[name]
    expected = pytree.tree_leaves((args, kwargs))
    found = call_leaves(args, kwargs)
    assert len(found) == len(expected)
    assert all(a is b for a, b in zip(found, expected))


def test_op_names_are_the_overloads_names_and_stay_so():
    assert op_name(torch.ops.aten.mul.Tensor) == "aten.mul.Tensor"
    assert op_name(torch.ops.aten.mul.Tensor) == "aten.mul.Tensor"  # the cached answer
    assert op_name(torch.ops.aten.add.Tensor) == "aten.add.Tensor"
