"""OpInfo entries that list FP8 dtypes, run as FP8 suite cases.

In torch 2.13 three OpInfo entries list FP8 dtypes for the CPU: `eye`,
`torch._scaled_mm` and `torch._scaled_mm_v2`. Which ones is read from the
cached op index (conformance/opindex.py), so a newer torch's additions appear
without a code change. Samples are made on the CPU (seeded); a factory's
`device=` keyword is pointed at the device under test.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.fp8.cases import Case, judge_bits, judge_fp8_ulp
from conformance.numerics import FP8_DTYPES, Comparison, compare

# Ops whose FP8 outputs are rounded results of arithmetic, judged within one FP8 step.
_ARITHMETIC_MARK = "scaled_mm"


def find_opinfo(full_name: str, state: dict[str, Any]) -> Any:
    """The OpInfo called `full_name` (op_db is imported once per worker, on first use)."""
    if "opinfos" not in state:
        from torch.testing._internal.common_methods_invocations import op_db

        state["opinfos"] = {op.full_name: op for op in op_db}
    return state["opinfos"].get(full_name)


def opinfo_cases(opinfo: Any, fp8: torch.dtype, seed: int, max_samples: int | None) -> list[Case]:
    torch.manual_seed(seed)
    samples = list(opinfo.sample_inputs("cpu", fp8))
    if max_samples is not None:
        samples = samples[:max_samples]
    judge = _judge_for(_ARITHMETIC_MARK in opinfo.full_name)
    cases = []
    for number, sample in enumerate(samples):
        leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
        if _fp8_formats(leaves) - {fp8}:
            continue  # mixes FP8 formats: a failure could not be put down to this one
        slots = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        inputs = [leaves[i] for i in slots]
        fn = _sample_runner(opinfo.op, leaves, spec, slots)
        cases.append(Case(_describe(number, leaves), inputs, fn, judge, None, "opinfo"))
    return cases


def _fp8_formats(leaves: list[Any]) -> set[torch.dtype]:
    dtypes = {leaf.dtype if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves}
    return {d for d in dtypes if d in FP8_DTYPES}


def _describe(number: int, leaves: list[Any]) -> str:
    """'sample 3: (15, 16) (16, 32) () ()': the tensor shapes, enough to find the sample again."""
    shapes = [str(tuple(leaf.shape)) for leaf in leaves if isinstance(leaf, torch.Tensor)]
    sizes = [str(leaf) for leaf in leaves if isinstance(leaf, int) and not isinstance(leaf, bool)]
    return f"sample {number}: " + " ".join(shapes or sizes)


def _sample_runner(op: Any, leaves: list[Any], spec: Any, slots: list[int]):
    def run(device: str, *tensors: torch.Tensor) -> Any:
        filled = list(leaves)
        for slot, tensor in zip(slots, tensors):
            filled[slot] = tensor
        first, args, kwargs = pytree.tree_unflatten(filled, spec)
        if "device" in kwargs:  # factories such as eye make their output where they are told
            kwargs = {**kwargs, "device": device}
        return op(first, *args, **kwargs)

    return run


def _judge_for(arithmetic: bool):
    fp8_exact = judge_bits(nan_equal=False, name_inputs=False)
    fp8_rounded = judge_fp8_ulp(1)

    def judge(dev: Any, ref: Any, inputs: list[torch.Tensor]) -> Comparison:
        if isinstance(ref, torch.Tensor) and ref.dtype in FP8_DTYPES:
            return (fp8_rounded if arithmetic else fp8_exact)(dev, ref, inputs)
        result = compare(dev, ref)
        if not result.ok:
            result.where = f"output {result.leaf}" if result.leaf is not None else "output"
        return result

    return judge
