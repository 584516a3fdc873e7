"""The dist suite's items: what `neuron-check dist` runs for a selection."""

from __future__ import annotations

import dataclasses
import fnmatch

from conformance.dist import SUITE
from conformance.suite import cli_option
from op_db.errors import InputError
from op_db.records import WorkItem

PARTS = ("collectives", "parity", "streams", "dtensor")
DEFAULT_PARTS = PARTS[:3]  # DTensor OpInfo runs when --ops asks for it
PARITY_WAYS = ("single", "ddp", "fsdp2", "fsdp2_tp", "pp_gpipe", "pp_1f1b", "pp_interleaved")
PARITY_WAYS += ("tp", "tp_sp", "zero1", "zero2", "zero3", "fsdp2_mp", "fsdp2_offload", "fsdp2_ac")
PARITY_WAYS += ("dcp", "cp_sdpa", "simple_fsdp", "pp_fsdp")
# Ways with their own variant or modes (the rest: two training steps, eager).
PARITY_VARIANTS = {"cp_sdpa": "causal"}
PARITY_MODES = {"simple_fsdp": ("eager", "compile")}
STREAM_CHECKS = ("order", "synchronize", "event_timing", "cross_stream", "device_module")
# DTensor OpInfo items: subject "dtensor.<OpInfo full name>", variant the input placement.
DTENSOR_PREFIX = "dtensor."
PLACEMENTS = ("shard0", "replicate", "partial")


@dataclasses.dataclass(frozen=True)
class DistOptions:
    """A dist run's selection; stored with the run so --resume rebuilds the same plan."""

    world_size: int = cli_option(2, "--world-size", "Ranks per world (local processes).", kind="count",
                                 show_default=True)
    dtypes: tuple[str, ...] = cli_option(("float32", "bfloat16"), "--dtype", "Comma list: fp32, bf16, fp16.",
                                         kind="list", show_default=True)
    parts: tuple[str, ...] = cli_option(DEFAULT_PARTS, "--parts", "Comma list of what to check: collectives, "
                                        "parity, streams, dtensor (needs --ops).", kind="list", show_default=True)
    collectives: tuple[str, ...] = cli_option((), "--collectives", "Comma list of collective names or globs "
                                              "(all_reduce.*, broadcast). Default: all.", kind="list")
    ways: tuple[str, ...] = cli_option((), "--ways", "Comma list of parity ways or globs (ddp, 'zero*', tp_sp). "
                                       "Default: all.", kind="list")
    ops: tuple[str, ...] = cli_option((), "--ops", "DTensor OpInfo: comma list of OpInfo full names or globs, each "
                                      "run on a 1-D mesh with Shard(0), Replicate and Partial inputs (adds the "
                                      "dtensor part).", kind="list")
    max_samples: int | None = cli_option(None, "--max-samples", "DTensor OpInfo: at most N samples per item.",
                                         kind="count")

    def __post_init__(self) -> None:
        from conformance.planning import parse_dtypes

        object.__setattr__(self, "dtypes", tuple(parse_dtypes(list(self.dtypes))))


def plan(options: DistOptions) -> list[WorkItem]:
    from conformance.dist.collectives import CATALOGUE, DTYPELESS, NO_DTYPE

    for part in options.parts:
        if part not in PARTS:
            raise InputError(f"unknown dist part {part!r}; known: {', '.join(PARTS)}.")
    items: list[WorkItem] = []
    if "dtensor" in options.parts and not options.ops:
        raise InputError("--parts dtensor needs --ops to say which OpInfo ops to run through DTensor.")
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
        items += [WorkItem(SUITE, f"parity.{way}", PARITY_VARIANTS.get(way, "train2"), dtype, mode)
                  for dtype in options.dtypes for way in chosen_ways(options.ways)
                  for mode in PARITY_MODES.get(way, ("eager",))]
    if "streams" in options.parts:
        items += [WorkItem(SUITE, f"streams.{check}", "ordering", NO_DTYPE, "eager") for check in STREAM_CHECKS]
    if options.ops:
        items += dtensor_items(options)
    return items


def chosen_ways(patterns: tuple[str, ...]) -> list[str]:
    """The parity ways `--ways` selects (all without it); a pattern matching none is an InputError."""
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(way, pattern) for way in PARITY_WAYS):
            raise InputError(f"no parity way matches {pattern!r}; known: {', '.join(PARITY_WAYS)}.")
    return [way for way in PARITY_WAYS if not patterns or any(fnmatch.fnmatchcase(way, p) for p in patterns)]


def dtensor_items(options: DistOptions) -> list[WorkItem]:
    """("dist", "dtensor.<op>", placement, dtype, "eager") for each chosen OpInfo op and
    requested dtype its CPU kernel supports."""
    from conformance.opindex import op_index
    from conformance.opinfo.plan import match_ops

    index = op_index()
    chosen = set(match_ops([entry["name"] for entry in index], options.ops))
    return [WorkItem(SUITE, DTENSOR_PREFIX + entry["name"], placement, dtype, "eager")
            for entry in index if entry["name"] in chosen
            for dtype in options.dtypes if dtype in entry["cpu"] for placement in PLACEMENTS]
