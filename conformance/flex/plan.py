"""Plan the flex attention suite: `FlexOptions` -> WorkItems ("flex_attention", subject, variant, dtype, mode)."""

from __future__ import annotations

import dataclasses
import fnmatch

from conformance.suite import cli_option
from op_db.errors import InputError
from op_db.records import WorkItem

SUITE = "flex_attention"
DEFAULT_DTYPES = ("float32", "bfloat16", "float16")


@dataclasses.dataclass(frozen=True)
class FlexOptions:
    """What `neuron-check flex-attention` selects; stored with the run so `--resume` rebuilds the plan."""

    subjects: tuple[str, ...] = cli_option((), "--subject", "Comma list of variants or globs ('block_sparse*'). "
                                           "Default: every variant.", kind="list")
    dtypes: tuple[str, ...] = cli_option(DEFAULT_DTYPES, "--dtype", "Comma list: fp32, bf16, fp16 or torch dtype "
                                         "names.", kind="list", show_default=True)
    grad: bool = cli_option(False, "--grad", "Also check gradients (the backward variant).", kind="flag")
    modes: tuple[str, ...] = cli_option(("eager",), "--mode", "Comma list: eager, compile "
                                        "(torch.compile(flex_attention)).", kind="list", show_default=True)

    def __post_init__(self) -> None:
        from conformance.planning import parse_dtypes, parse_modes

        object.__setattr__(self, "dtypes", tuple(parse_dtypes(list(self.dtypes))))
        object.__setattr__(self, "modes", parse_modes(self.modes))


def plan(options: FlexOptions) -> list[WorkItem]:
    from conformance.flex.variants import VARIANTS

    if any(dtype.startswith("float8") for dtype in options.dtypes):
        raise InputError("the flex attention suite runs float32, bfloat16 and float16 only.")
    names = list(VARIANTS)
    if options.subjects:
        unknown = [p for p in options.subjects if not fnmatch.filter(names, p)]
        if unknown:
            raise InputError(f"no flex attention variant matches {unknown[0]!r} (known: {', '.join(names)}).")
        names = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in options.subjects)]
    steps = ["forward"] + (["backward"] if options.grad else [])
    return [WorkItem(SUITE, name, step, dtype, mode)
            for name in names for dtype in options.dtypes for mode in options.modes for step in steps]
