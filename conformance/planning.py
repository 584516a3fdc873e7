"""Turning command-line choices into a list of WorkItems (DESIGN.md, "Data flow").

Planning needs a little of what OpInfo knows about each op (its full name, the
dtypes the CPU supports, whether it has autograd). Importing PyTorch's op
database takes seconds, so that index is cached as JSON per torch build;
planning a run is then instant and the worker processes, which must import the
database anyway, start at once. (Dtype claims are judged in the worker, which
holds the OpInfo: conformance/opinfo_checks.py, `claim_device_type`.)
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib.util
import json
import os
import zlib
from pathlib import Path
from typing import Any

from op_db.errors import InputError
from op_db.records import WorkItem

DTYPE_ALIASES = {
    "fp32": "float32", "float": "float32", "fp16": "float16", "half": "float16",
    "bf16": "bfloat16", "fp64": "float64", "double": "float64", "int": "int32", "long": "int64",
    "cfloat": "complex64", "cdouble": "complex128", "bool": "bool",
}
DEFAULT_DTYPES = ("float32", "bfloat16", "float16")
FP8 = "fp8"
MODES = ("eager", "compile")
_GRAD_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "complex64", "complex128"})
_INDEX_FORMAT = 2


def parse_dtypes(names: list[str] | None) -> list[str]:
    """['fp32', 'torch.bfloat16', 'fp8'] -> ['float32', 'bfloat16', 'fp8'] (order kept, no repeats)."""
    import torch

    if not names:
        return list(DEFAULT_DTYPES)
    found: list[str] = []
    for raw in names:
        name = raw.strip().lower().removeprefix("torch.")
        if name == FP8 or name.startswith("float8"):
            canonical = FP8 if name == FP8 else name
        else:
            name = DTYPE_ALIASES.get(name, name)
            value = getattr(torch, name, None)
            if not isinstance(value, torch.dtype):
                raise InputError(
                    f"unknown dtype {raw!r}; use fp32, bf16, fp16, fp8 or a torch dtype name such as float64."
                )
            canonical = str(value).removeprefix("torch.")
        if canonical not in found:
            found.append(canonical)
    return found


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """'2/4' -> (2, 4); None stays None."""
    if not text:
        return None
    k, sep, n = text.partition("/")
    if not sep or not k.strip().isdigit() or not n.strip().isdigit() or not 1 <= int(k) <= int(n):
        raise InputError(f"--shard must be K/N with 1 <= K <= N, for example 1/4, not {text!r}.")
    return int(k), int(n)


def in_shard(item: WorkItem, shard: tuple[int, int] | None) -> bool:
    """Stable split: an item's shard depends only on its own name, never on the rest of the plan."""
    if shard is None:
        return True
    k, n = shard
    return zlib.crc32(item.test_id.encode()) % n == k - 1


@dataclasses.dataclass(frozen=True)
class PlanOptions:
    """The options that define a plan; stored with the run so `--resume` rebuilds it."""

    ops: tuple[str, ...] = ()  # empty: every op
    exclude: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = DEFAULT_DTYPES
    grad: bool = False
    mode: str = "eager"
    shard: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"ops": list(self.ops), "exclude": list(self.exclude), "dtypes": list(self.dtypes),
                "grad": self.grad, "mode": self.mode, "shard": self.shard}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PlanOptions":
        return cls(ops=tuple(data.get("ops") or ()), exclude=tuple(data.get("exclude") or ()),
                   dtypes=tuple(data.get("dtypes") or DEFAULT_DTYPES), grad=bool(data.get("grad")),
                   mode=data.get("mode") or "eager", shard=data.get("shard"))


def match_ops(names: list[str], patterns: tuple[str, ...], what: str = "--ops") -> list[str]:
    """Full names matching any pattern (exact name or fnmatch glob); each pattern must match."""
    chosen: set[str] = set()
    for pattern in patterns:
        hits = [n for n in names if n == pattern] or fnmatch.filter(names, pattern)
        if not hits:
            raise InputError(f"{what} pattern {pattern!r} matches no OpInfo op (try a glob such as 'nn.functional.*').")
        chosen.update(hits)
    return [n for n in names if n in chosen]


def plan_opinfo(options: PlanOptions, device_type: str) -> list[WorkItem]:
    """Items for every chosen op x requested dtype the CPU supports x variant, in a stable order."""
    index = op_index()
    names = [entry["name"] for entry in index]
    chosen = set(match_ops(names, options.ops) if options.ops else names)
    if options.exclude:
        chosen -= set(match_ops(names, options.exclude, "--exclude"))
    dtypes = [d for d in options.dtypes if d != FP8 and not d.startswith("float8")]
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
                item = WorkItem("opinfo", entry["name"], variant, dtype, options.mode)
                if in_shard(item, shard):
                    items.append(item)
    return items


def plan(options: PlanOptions, device_type: str) -> list[WorkItem]:
    """OpInfo items, plus the FP8 suite's items (conformance/fp8.py) when fp8 dtypes were asked for.

    `--ops` patterns that name FP8 subjects (cast, scaled_mm, ...) select those and need not
    match an OpInfo op; without `--ops` the FP8 suite runs all its subjects.
    """
    fp8_dtypes = [d for d in options.dtypes if d == FP8 or d.startswith("float8")]
    opinfo_dtypes = tuple(d for d in options.dtypes if d not in fp8_dtypes)
    opinfo_ops, fp8_subjects, fp8 = options.ops, None, None
    if fp8_dtypes:
        try:
            from conformance.fp8 import suite as fp8
        except ImportError:
            fp8 = None
        if fp8 is None or not hasattr(fp8, "plan"):
            raise InputError("fp8 suite not available in this version of neuron-check.")
        known = [str(s) for s in getattr(fp8, "SUBJECTS", ())]
        taken = [p for p in options.ops if fnmatch.filter(known, p)]
        if options.ops:
            fp8_subjects = sorted({s for p in taken for s in fnmatch.filter(known, p)})
        opinfo_ops = tuple(p for p in options.ops if p not in taken)
    items: list[WorkItem] = []
    if opinfo_dtypes and not (options.ops and not opinfo_ops):
        items = plan_opinfo(dataclasses.replace(options, ops=opinfo_ops, dtypes=opinfo_dtypes), device_type)
    if fp8 is not None and fp8_subjects != []:
        shard = parse_shard(options.shard)
        fp8_items = fp8.plan(fp8_dtypes, mode=options.mode, grad=options.grad, subjects=fp8_subjects)
        items.extend(i for i in fp8_items if in_shard(i, shard))
    return items


# -- the cached op index ------------------------------------------------------

_index_memo: list[dict[str, Any]] | None = None


def _source_stamp() -> str:
    import torch

    spec = importlib.util.find_spec("torch.testing._internal.common_methods_invocations")
    origin = spec.origin if spec and spec.origin else ""
    stat = os.stat(origin) if origin else None
    return f"{_INDEX_FORMAT}-{torch.__version__}-{stat.st_size if stat else 0}-{int(stat.st_mtime) if stat else 0}"


def _cache_path(stamp: str) -> Path:
    root = os.environ.get("NEURON_CHECK_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "neuron-check"
    )
    return Path(root) / f"opinfo-index-{zlib.crc32(stamp.encode()):08x}.json"


def build_index(op_db: list[Any]) -> list[dict[str, Any]]:
    """What planning needs of each OpInfo, as plain JSON-able data."""
    def names(dtypes: Any) -> list[str]:
        return sorted(str(d).removeprefix("torch.") for d in dtypes)

    index = []
    for op in op_db:
        index.append({
            "name": op.full_name,
            "cpu": names(op.supported_dtypes("cpu")),
            "autograd": bool(op.supports_autograd),
        })
    return index


def op_index() -> list[dict[str, Any]]:
    """The op index, from the cache when it matches this torch build, else built and cached."""
    global _index_memo
    if _index_memo is not None:
        return _index_memo
    stamp = _source_stamp()
    path = _cache_path(stamp)
    try:
        data = json.loads(path.read_text())
        if data.get("stamp") == stamp:
            _index_memo = data["ops"]
            return _index_memo
    except (OSError, ValueError, KeyError):
        pass
    from torch.testing._internal.common_methods_invocations import op_db

    _index_memo = build_index(op_db)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"stamp": stamp, "ops": _index_memo}))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home only costs the import next time
    return _index_memo
