"""Plan the kernels suite: `KernelOptions` -> WorkItems ("kernels", "NS::NAME", variant, dtype, mode).

Planning imports TARGET (conformance/kernels/target.py) to find its ops, and refuses, with one
sentence, an op that has no reference or no samples: the run could only SKIP it.
"""

from __future__ import annotations

import dataclasses
import os

from conformance.suite import cli_option
from op_db.errors import InputError
from op_db.records import WorkItem

SUITE = "kernels"
OPCHECKS = {  # variant -> torch.library.opcheck's test name
    "opcheck.schema": "test_schema",
    "opcheck.fake": "test_faketensor",
    "opcheck.autograd_registration": "test_autograd_registration",
    "opcheck.aot_dispatch_dynamic": "test_aot_dispatch_dynamic",
}
DEFAULT_DTYPES = ("float32", "bfloat16", "float16")


@dataclasses.dataclass(frozen=True)
class KernelOptions:
    """What `neuron-check kernels` selects; stored with the run so `--resume` rebuilds the plan."""

    target: str = cli_option("", "TARGET", "A Python file or importable module that registers custom ops.",
                             kind="argument")
    ops: tuple[str, ...] = cli_option((), "--op", "Comma list of ops or globs ('mylib::*attention*'). "
                                      "Default: every op TARGET registered.", kind="list")
    dtypes: tuple[str, ...] = cli_option(DEFAULT_DTYPES, "--dtype", "Comma list: fp32, bf16, fp16 or torch dtype "
                                         "names.", kind="list", show_default=True)
    grad: bool = cli_option(False, "--grad", "Also check gradients (the backward variant).", kind="flag")
    modes: tuple[str, ...] = cli_option(("eager",), "--mode", "Comma list: eager (opcheck, forward, backward), "
                                        "compile (forward and backward through torch.compile(fullgraph=True)).",
                                        kind="list", show_default=True)
    family: str | None = cli_option(None, "--family", "Samples from a family generator for ops that declare none: "
                                    "attention, moe, norm, rotary, softmax or matmul for every such op, or "
                                    "'NS::NAME=FAMILY,...' per op.")
    max_samples: int | None = cli_option(None, "--max-samples", "At most N samples per item.", kind="count")

    def __post_init__(self) -> None:
        from conformance.planning import parse_dtypes, parse_modes

        object.__setattr__(self, "dtypes", tuple(parse_dtypes(list(self.dtypes))))
        object.__setattr__(self, "modes", parse_modes(self.modes))
        if self.target.endswith(".py") and os.path.isfile(self.target):
            # Workers, --resume and Ray actors find the file from any working folder.
            object.__setattr__(self, "target", os.path.abspath(self.target))
        from conformance.kernels.specs import families_by_op

        families_by_op(self.family)  # refuse a bad --family before anything runs


def plan(options: KernelOptions) -> list[WorkItem]:
    from conformance.kernels.specs import specs_for

    if any(dtype.startswith("float8") or dtype == "fp8" for dtype in options.dtypes):
        raise InputError("the kernels suite has no FP8 samples yet; use fp32, bf16 or fp16.")
    specs = specs_for(options)
    items = []
    for spec in specs:
        for dtype in options.dtypes:
            for mode in options.modes:
                variants = (list(OPCHECKS) if mode == "eager" else []) + ["forward"] + (["backward"] if options.grad else [])
                items.extend(WorkItem(SUITE, spec.name, variant, dtype, mode) for variant in variants)
    return items
