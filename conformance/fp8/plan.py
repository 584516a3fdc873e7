"""Plan the FP8 suite: ("fp8", subject, variant, dtype, mode) items.

    subject    variants
    cast       from_float32 from_bfloat16 from_float16 to_float32 to_bfloat16 to_float16
    scaled_mm  per_tensor rowwise
    movement   copy view cat index_select transpose
    opinfo     the full names of the OpInfo entries whose CPU dtypes list the format

From `neuron-check ops`: FP8 dtypes in `--dtype` (fp8 or float8_* names) plan these items;
`--ops` patterns that match a subject select it (the others are the OpInfo suite's).
"""

from __future__ import annotations

import fnmatch

from conformance.fp8.inputs import FP8_NAMES, WIDE_NAMES, fp8_dtype
from conformance.planning import MODES, OpsOptions, in_shard, is_fp8, parse_shard
from op_db.errors import InputError
from op_db.records import WorkItem

SUITE = "fp8"
SUBJECTS: dict[str, tuple[str, ...]] = {
    "cast": tuple(f"from_{w}" for w in WIDE_NAMES) + tuple(f"to_{w}" for w in WIDE_NAMES),
    "scaled_mm": ("per_tensor", "rowwise"),
    "movement": ("copy", "view", "cat", "index_select", "transpose"),
    "opinfo": (),  # variants: OpInfo full names, found per dtype
}


def expand_dtypes(dtypes: list[str]) -> list[str]:
    """'fp8' -> every FP8 format this torch has; float8_* names are checked and kept."""
    found: list[str] = []
    for name in dtypes:
        name = name.strip().lower().removeprefix("torch.")
        names = [n for n in FP8_NAMES if fp8_dtype(n) is not None] if name == "fp8" else [name]
        for n in names:
            if n not in FP8_NAMES:
                raise InputError(f"unknown FP8 dtype {name!r}; use fp8 or one of {', '.join(FP8_NAMES)}.")
            if n not in found:
                found.append(n)
    return found


def plan(dtypes: list[str], *, mode: str, grad: bool = False, subjects: list[str] | None = None) -> list[WorkItem]:
    """The FP8 items for `dtypes` ('fp8' or float8_* names) in one mode.

    `subjects` narrows to some of cast, scaled_mm, movement, opinfo (None: all).
    `grad` is accepted for symmetry with the OpInfo plan; FP8 has no backward items.
    """
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}; use {' or '.join(MODES)}.")
    chosen = list(SUBJECTS) if subjects is None else subjects
    for subject in chosen:
        if subject not in SUBJECTS:
            raise InputError(f"unknown FP8 subject {subject!r}; use {', '.join(SUBJECTS)}.")
    items = []
    for dtype in expand_dtypes(dtypes):
        for subject in chosen:
            variants = SUBJECTS[subject] if subject != "opinfo" else _opinfo_variants(dtype)
            items.extend(WorkItem(SUITE, subject, variant, dtype, mode) for variant in variants)
    return items


def _opinfo_variants(dtype: str) -> list[str]:
    """Full names of the OpInfo entries whose CPU dtypes include `dtype`."""
    from conformance.opindex import op_index

    return [entry["name"] for entry in op_index() if dtype in entry["cpu"]]


def taken_patterns(options: OpsOptions) -> set[str]:
    """The `--ops` patterns that name FP8 subjects, when FP8 dtypes are asked for."""
    if not any(is_fp8(d) for d in options.dtypes):
        return set()
    return {p for p in options.ops if fnmatch.filter(list(SUBJECTS), p)}


def plan_ops(options: OpsOptions) -> list[WorkItem]:
    """The FP8 items of an `ops` selection: every subject, or those `--ops` names."""
    fp8_dtypes = [d for d in options.dtypes if is_fp8(d)]
    if not fp8_dtypes:
        return []
    subjects = None
    if options.ops:
        subjects = sorted({s for p in taken_patterns(options) for s in fnmatch.filter(list(SUBJECTS), p)})
        if not subjects:
            return []
    shard = parse_shard(options.shard)
    return [i for mode in options.modes for i in plan(fp8_dtypes, mode=mode, grad=options.grad, subjects=subjects)
            if in_shard(i, shard)]
