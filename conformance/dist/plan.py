"""The dist suite's items: what `neuron-check dist` runs for a selection."""

from __future__ import annotations

import dataclasses
import fnmatch

from conformance.dist import SUITE
from conformance.suite import cli_option
from op_db.errors import InputError
from op_db.records import WorkItem

PARTS = ("collectives", "parity", "streams")
PARITY_WAYS = ("single", "ddp", "fsdp2", "fsdp2_tp")
STREAM_CHECKS = ("order", "synchronize", "device_module")


@dataclasses.dataclass(frozen=True)
class DistOptions:
    """A dist run's selection; stored with the run so --resume rebuilds the same plan."""

    world_size: int = cli_option(2, "--world-size", "Ranks per world (local processes).", kind="count",
                                 show_default=True)
    dtypes: tuple[str, ...] = cli_option(("float32", "bfloat16"), "--dtype", "Comma list: fp32, bf16, fp16.",
                                         kind="list", show_default=True)
    parts: tuple[str, ...] = cli_option(PARTS, "--parts", "Comma list of what to check: collectives, parity, "
                                        "streams.", kind="list", show_default=True)
    collectives: tuple[str, ...] = cli_option((), "--collectives", "Comma list of collective names or globs "
                                              "(all_reduce.*, broadcast). Default: all.", kind="list")

    def __post_init__(self) -> None:
        from conformance.planning import parse_dtypes

        object.__setattr__(self, "dtypes", tuple(parse_dtypes(list(self.dtypes))))


def plan(options: DistOptions) -> list[WorkItem]:
    from conformance.dist.collectives import CATALOGUE, DTYPELESS, NO_DTYPE

    for part in options.parts:
        if part not in PARTS:
            raise InputError(f"unknown dist part {part!r}; known: {', '.join(PARTS)}.")
    items: list[WorkItem] = []
    if "collectives" in options.parts:
        for pattern in options.collectives:
            if not any(fnmatch.fnmatchcase(name, pattern) for name in CATALOGUE):
                raise InputError(f"no collective matches {pattern!r}; known: {', '.join(CATALOGUE)}.")
        for name, spec in CATALOGUE.items():
            if options.collectives and not any(fnmatch.fnmatchcase(name, p) for p in options.collectives):
                continue
            dtypes = (NO_DTYPE,) if name in DTYPELESS else options.dtypes
            items += [WorkItem(SUITE, name, variant, dtype, "eager") for dtype in dtypes for variant in spec.variants]
    if "parity" in options.parts:
        items += [WorkItem(SUITE, f"parity.{way}", "train2", dtype, "eager")
                  for dtype in options.dtypes for way in PARITY_WAYS]
    if "streams" in options.parts:
        items += [WorkItem(SUITE, f"streams.{check}", "ordering", NO_DTYPE, "eager") for check in STREAM_CHECKS]
    return items
