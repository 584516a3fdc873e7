"""Plan the OpInfo suite: `OpsOptions` -> ("opinfo", full name, variant, dtype, mode) items.

`--ops` patterns that name FP8 subjects (cast, scaled_mm, ...) belong to the FP8 suite when
FP8 dtypes are asked for (conformance/fp8/plan.py); they need not match an OpInfo op.
"""

from __future__ import annotations

import fnmatch

from conformance.fp8.plan import taken_patterns
from conformance.opindex import op_index
from conformance.planning import OpsOptions, in_shard, is_fp8, parse_shard
from op_db.errors import InputError
from op_db.records import WorkItem
from op_db.text import did_you_mean

SUITE = "opinfo"
_GRAD_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "complex64", "complex128"})


def match_ops(names: list[str], patterns: tuple[str, ...], what: str = "--ops") -> list[str]:
    """Full names matching any pattern (exact name or fnmatch glob); each pattern must match."""
    chosen: set[str] = set()
    unmatched = []
    for pattern in patterns:
        hits = [n for n in names if n == pattern] or fnmatch.filter(names, pattern)
        if not hits:
            unmatched.append(pattern)
        chosen.update(hits)
    if unmatched:  # every bad pattern at once, each with the names it was probably meant to be
        listed = ", ".join(f"{p!r}{did_you_mean(p.replace('*', ''), names, dotted_tail=True)}" for p in unmatched)
        many = len(unmatched) > 1
        raise InputError(f"{what} pattern{'s' if many else ''} {listed} match{'' if many else 'es'} no OpInfo op "
                         "(try a glob such as 'nn.functional.*').")
    return [n for n in names if n in chosen]


def plan(options: OpsOptions) -> list[WorkItem]:
    """Items for every chosen op x requested dtype the CPU supports x variant, in a stable order."""
    dtypes = [d for d in options.dtypes if not is_fp8(d)]
    taken = taken_patterns(options)
    patterns = tuple(p for p in options.ops if p not in taken)
    if not dtypes or (options.ops and not patterns):
        return []
    index = op_index()
    names = [entry["name"] for entry in index]
    chosen = set(match_ops(names, patterns) if patterns else names)
    if options.exclude:
        chosen -= set(match_ops(names, options.exclude, "--exclude"))
    shard = parse_shard(options.shard)
    items: list[WorkItem] = []
    for entry in index:
        if entry["name"] not in chosen:
            continue
        for dtype in dtypes:
            if dtype not in entry["cpu"]:
                continue
            variants = ["forward"]
            if options.grad and entry["autograd"] and dtype in _GRAD_DTYPES:
                variants.append("backward")
            for variant in variants:
                for mode in options.modes:
                    item = WorkItem(SUITE, entry["name"], variant, dtype, mode)
                    if in_shard(item, shard):
                        items.append(item)
    return items
