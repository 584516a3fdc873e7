"""Family sample generators: the edge shapes a kernel of one family must survive.

Each family fixes an argument convention (documented in its module and in docs/kernels.md)
and reads the op's schema for the optional arguments it knows, so one generator serves every
op that follows the convention. A generator is `generate(schema, dtype, requires_grad)`
yielding `(args, kwargs, label)` on the CPU; the suite moves the tensors to the device with
their strides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from conformance.kernels.families import attention, matmul, moe, norm, rotary, softmax

Generator = Callable[[Any, Any, bool], Iterator[tuple[tuple, dict, str]]]

FAMILIES: dict[str, Generator] = {
    "attention": attention.generate,
    "moe": moe.generate,
    "norm": norm.generate,
    "rotary": rotary.generate,
    "softmax": softmax.generate,
    "matmul": matmul.generate,
}
