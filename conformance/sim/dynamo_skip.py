"""Keep torch.compile out of the sim device's own machinery.

Dynamo compiles every Python frame it sees while a compiled region is being traced or run,
unless the code lives in torch itself. The sim device's fallback and autocast policy are
Python code that the dispatcher calls back into (the PrivateUse1 and AutocastPrivateUse1
kernels). Left alone, dynamo tries to compile those frames, graph-breaks inside the device's
own machinery, and can fail outright. A real backend's kernels are C++ and are
never traced; marking these code objects "skip, recursively" gives sim the same property.

The marking goes through the C-level frame-strategy API, so registering sim does not import
``torch._dynamo`` (about 1.7 s) in processes that never compile.
"""

from __future__ import annotations

import types


def skip_recursively(*functions) -> None:
    """Dynamo runs these functions, and everything they call, without tracing them."""
    from torch._C._dynamo.eval_frame import (
        _FrameAction,
        _FrameExecStrategy,
        set_code_exec_strategy,
    )

    strategy = _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP)
    for fn in functions:
        set_code_exec_strategy(_code_of(fn), strategy)


def _code_of(fn) -> types.CodeType:
    fn = getattr(fn, "__func__", fn)  # classmethod / bound method
    return fn.__code__

