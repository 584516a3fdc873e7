"""The sim profile schema: what a coverage/fault profile holds, its validation and op matching.

The one definition of a profile: `conformance.sim` applies it, `op_db.profile` exports a
measured run as one, and the porting check predicts from one. It lives in op_db, the
ground floor every package may import, and needs nothing but the standard library (torch
only to list dtype names).


A profile says which aten overloads the simulated backend lacks (`unsupported_ops`), which
run through a CPU fallback (`fallback_ops`), which dtypes it cannot hold
(`unsupported_dtypes`) and which faults it injects (`faults`). Compile mode has its own two:
`compile_faults` (the `faults` entry format, applied only to ops that run inside a compiled
graph) and `compile_unsupported_ops` (the sim backend compiler refuses a graph that calls
one). `event_timing` (``{"scale": X}``) makes the device's events lie: every
`elapsed_time` is multiplied by X. `devices` is how many sim devices there are (default 1).
`flex_attention` (default true) says whether sim provides flex attention; false makes it refuse
`flex_attention` exactly as stock PyTorch refuses an unlisted device type.
See DESIGN.md, "The `sim` device". Op names are `str(OpOverload)` (e.g. ``aten.mul.Tensor``) and may use ``*`` globs.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from op_db.errors import InputError
from op_db.text import closest, did_you_mean, suggestion

FAULT_KINDS = ("scale", "offset", "nan", "crash", "hang", "raise", "truncate", "stochastic", "double_round", "delay")
# Kinds that recompute the op one precision up and round the result into the output dtype.
ROUNDING_KINDS = frozenset({"truncate", "stochastic", "double_round"})
# A collective has no op to recompute one precision up: rounding kinds apply to ops only.
# `unsupported` makes the process group refuse the collective as a backend without it does.
COLLECTIVE_FAULT_KINDS = tuple(k for k in FAULT_KINDS if k not in ROUNDING_KINDS) + ("unsupported",)
_VALUE_KINDS = {"scale": (int, float), "offset": (int, float), "raise": (str,), "delay": (int, float)}
_OPTIONAL_VALUE_KINDS = {"stochastic": "a non-negative integer seed for the draws"}
_TOP_KEYS = ("name", "unsupported_ops", "fallback_ops", "unsupported_dtypes", "faults", "collective_faults",
             "compile_faults", "compile_unsupported_ops", "event_timing", "devices", "flex_attention")
MAX_DEVICES = 16  # what the sim runtime (conformance/sim/csrc) can hold
_FAULT_KEYS = ("op", "dtype", "kind", "value")
_COLLECTIVE_FAULT_KEYS = ("op", "dtype", "kind", "value", "rank", "peer")
# Point-to-point collectives: a fault on one may name the other end (`peer`: send's destination,
# recv's source), so one link of a pipeline can be broken.
POINT_TO_POINT = ("send", "recv")
# The c10d collectives a `collective_faults` entry may name (torch.distributed's function names).
COLLECTIVES = (
    "all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
    "broadcast", "all_to_all", "all_to_all_single", "send", "recv", "barrier", "reduce", "gather", "scatter",
)
# An op pattern: dotted aten-style name made of identifier characters and `*` globs.
_OP_PATTERN = re.compile(r"^[A-Za-z0-9_*]+(\.[A-Za-z0-9_*]+)*$")


@dataclass(frozen=True)
class Fault:
    """One injected fault: `kind` applied to ops matching `op` (and `dtype`, when given)."""

    op: str
    kind: str
    dtype: str | None = None
    value: float | str | None = None


@dataclass(frozen=True)
class CollectiveFault:
    """A fault of the sim c10d backend: `kind` applied to the outputs of collective `op`
    (on `rank` only, for `dtype` only, and for a send/recv only with `peer`, when given)."""

    op: str
    kind: str
    dtype: str | None = None
    value: float | str | None = None
    rank: int | None = None
    peer: int | None = None

    def applies(self, collective: str, dtype: str | None, rank: int, peer: int | None = None) -> bool:
        return (fnmatch.fnmatchcase(collective, self.op) and (self.dtype is None or self.dtype == dtype)
                and (self.rank is None or self.rank == rank) and (self.peer is None or self.peer == peer))


@dataclass(frozen=True)
class SimProfile:
    """A validated sim profile. Build it with `load_profile`."""

    name: str = "default"
    unsupported_ops: tuple[str, ...] = ()
    fallback_ops: tuple[str, ...] = ()
    unsupported_dtypes: tuple[str, ...] = ()
    faults: tuple[Fault, ...] = field(default_factory=tuple)
    collective_faults: tuple[CollectiveFault, ...] = field(default_factory=tuple)
    compile_faults: tuple[Fault, ...] = field(default_factory=tuple)
    compile_unsupported_ops: tuple[str, ...] = ()
    event_timing_scale: float | None = None  # the event_timing fault: elapsed_time multiplied by it
    devices: int = 1
    flex_attention: bool = True  # False: sim refuses flex_attention as stock PyTorch does

    def is_unsupported_op(self, op_name: str) -> bool:
        return _matches_any(self.unsupported_ops, op_name)

    def is_fallback_op(self, op_name: str) -> bool:
        return _matches_any(self.fallback_ops, op_name)

    def faults_for(self, op_name: str) -> tuple[Fault, ...]:
        """Faults whose op pattern matches `op_name` (dtype filters are applied by the caller)."""
        return _faults_for(self.faults, op_name)

    def compile_faults_for(self, op_name: str) -> tuple[Fault, ...]:
        """`compile_faults` whose op pattern matches `op_name`."""
        return _faults_for(self.compile_faults, op_name)

    def is_compile_unsupported_op(self, op_name: str) -> bool:
        return _matches_any(self.compile_unsupported_ops, op_name)

    def to_dict(self) -> dict[str, Any]:
        def entries(faults) -> list[dict[str, Any]]:
            return [{k: v for k, v in vars(f).items() if v is not None} for f in faults]

        collective, compiled = entries(self.collective_faults), entries(self.compile_faults)
        return {
            "name": self.name,
            "unsupported_ops": list(self.unsupported_ops),
            "fallback_ops": list(self.fallback_ops),
            "unsupported_dtypes": list(self.unsupported_dtypes),
            "faults": entries(self.faults),
            **({"collective_faults": collective} if collective else {}),
            **({"compile_faults": compiled} if compiled else {}),
            **({"compile_unsupported_ops": list(self.compile_unsupported_ops)}
               if self.compile_unsupported_ops else {}),
            **({"event_timing": {"scale": self.event_timing_scale}} if self.event_timing_scale is not None else {}),
            **({"devices": self.devices} if self.devices != 1 else {}),
            **({"flex_attention": False} if not self.flex_attention else {}),
        }


@lru_cache(maxsize=65536)
def _matches_any(patterns: tuple[str, ...], op_name: str) -> bool:
    return any(fnmatch.fnmatchcase(op_name, p) for p in patterns)


@lru_cache(maxsize=65536)
def _faults_for(faults: tuple[Fault, ...], op_name: str) -> tuple[Fault, ...]:
    return tuple(f for f in faults if fnmatch.fnmatchcase(op_name, f.op))


def dtype_names() -> frozenset[str]:
    """Every dtype name torch knows (`float32`, `bfloat16`, `float8_e5m2`, ...)."""
    import torch

    return frozenset(n for n in dir(torch) if isinstance(getattr(torch, n, None), torch.dtype))


def load_profile(source: str | os.PathLike | Mapping[str, Any]) -> SimProfile:
    """Read and validate a profile from a JSON file path or an already-parsed dict."""
    if not isinstance(source, (str, os.PathLike)):
        return _parse(source, "the sim profile")
    path = Path(source)
    if not path.is_file():
        raise InputError(f"Sim profile file {str(path)!r} does not exist.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"Sim profile {str(path)!r} is not valid JSON: {exc}.") from None
    return _parse(data, f"sim profile {str(path)!r}")


def _object(data: Any, allowed: tuple[str, ...], what: str, where: str) -> Mapping:
    if not isinstance(data, Mapping):
        raise InputError(f"In {where}: {what} must be a JSON object.")
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise InputError(
            f"In {where}: {what} has unknown key {unknown[0]!r} (allowed: {', '.join(allowed)})."
        )
    return data


def _parse(data: Any, where: str) -> SimProfile:
    _object(data, _TOP_KEYS, "the top level", where)
    name = data.get("name", "default")
    if not isinstance(name, str):
        raise InputError(f"In {where}: 'name' must be a string.")
    ops = {k: _op_list(data.get(k, []), k, where) for k in ("unsupported_ops", "fallback_ops")}
    dtypes = _dtype_list(data.get("unsupported_dtypes", []), where)
    faults = _fault_list(data, "faults", where)
    compile_faults = _fault_list(data, "compile_faults", where)
    compile_unsupported = _op_list(data.get("compile_unsupported_ops", []), "compile_unsupported_ops", where)
    raw_collective = data.get("collective_faults", [])
    if not isinstance(raw_collective, list):
        raise InputError(f"In {where}: 'collective_faults' must be a list.")
    collective = tuple(_collective_fault(i, entry, where) for i, entry in enumerate(raw_collective))
    return SimProfile(
        name=name,
        unsupported_ops=ops["unsupported_ops"],
        fallback_ops=ops["fallback_ops"],
        unsupported_dtypes=dtypes,
        faults=faults,
        collective_faults=collective,
        compile_faults=compile_faults,
        compile_unsupported_ops=compile_unsupported,
        event_timing_scale=_event_timing(data.get("event_timing"), where),
        devices=_devices(data.get("devices", 1), where),
        flex_attention=_flag(data.get("flex_attention", True), "flex_attention", where),
    )


def _flag(value: Any, key: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"In {where}: {key!r} must be true or false, not {value!r}.")
    return value


def _event_timing(value: Any, where: str) -> float | None:
    if value is None:
        return None
    _object(value, ("scale",), "'event_timing'", where)
    scale = value.get("scale")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise InputError(f"In {where}: 'event_timing' needs a 'scale' that is a positive number, not {scale!r}.")
    return float(scale)


def _devices(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DEVICES:
        raise InputError(f"In {where}: 'devices' must be a whole number from 1 to {MAX_DEVICES}, not {value!r}.")
    return value


def is_op_pattern(text: Any) -> bool:
    """An aten-style dotted op name, `*` globs allowed ('aten.mul.Tensor', 'aten.sort.*')."""
    return isinstance(text, str) and bool(_OP_PATTERN.match(text))


def _check_op(pattern: Any, what: str, where: str) -> str:
    if not is_op_pattern(pattern):
        raise InputError(
            f"In {where}: {what} has a bad op name or glob {pattern!r} "
            "(expected an aten overload like 'aten.mul.Tensor', '*' allowed)."
        )
    return pattern


# The higher-order operators a backend gives kernels (sim's flex attention): faults may name them.
HOP_KERNELS = ("higher_order.flex_attention", "higher_order.flex_attention_backward")


@lru_cache(maxsize=1)
def known_op_names() -> tuple[str, ...]:
    """Every operator overload this torch's dispatcher knows, as profiles name them ('aten.mul.Tensor')."""
    import torch

    names = set()
    for qualified in torch._C._dispatch_get_all_op_names():
        namespace, _, rest = qualified.partition("::")
        name, _, overload = rest.partition(".")
        names.add(f"{namespace}.{name}.{overload or 'default'}")
    names.update(HOP_KERNELS)
    return tuple(sorted(names))


def _check_known_op(pattern: str, what: str, where: str) -> str:
    """An op name must be an overload this torch has, and a glob must match one: a typo would
    otherwise inject nothing (every item passes) and prove nothing. Says the closest names."""
    known = known_op_names()
    if "*" in pattern:
        if any(fnmatch.fnmatchcase(name, pattern) for name in known):
            return pattern
        packet, _, overload = pattern.rpartition(".") if pattern.count(".") >= 2 else (pattern, "", "")
        packets = {name.rpartition(".")[0] for name in known}
        near = closest(packet.replace("*", ""), packets)
        hint = suggestion([f"{name}.{overload}" for name in near] if overload else near)
        raise InputError(f"In {where}: {what} has the glob {pattern!r}, which matches no operator of this "
                         f"torch{hint}.")
    if pattern in known:
        return pattern
    overloads = [name for name in known if name.startswith(pattern + ".")]
    hint = f" (did you mean {pattern + '.*'!r} or one overload, such as {overloads[0]!r}?)" if overloads \
        else did_you_mean(pattern, known)
    raise InputError(f"In {where}: {what} names {pattern!r}, which is not an operator of this torch{hint}; "
                     "expected an overload like 'aten.mul.Tensor' or 'aten.sin.default'.")


def _op_list(value: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise InputError(f"In {where}: {key!r} must be a list of op names.")
    names = tuple(_check_op(p, f"{key} entry {i}", where) for i, p in enumerate(value))
    for i, name in enumerate(names):
        _check_known_op(name, f"{key} entry {i}", where)
    return names


def _fault_list(data: Mapping, key: str, where: str) -> tuple[Fault, ...]:
    raw = data.get(key, [])
    if not isinstance(raw, list):
        raise InputError(f"In {where}: {key!r} must be a list.")
    faults = tuple(_fault(i, entry, where, key) for i, entry in enumerate(raw))
    for i, fault in enumerate(faults):
        _check_known_op(fault.op, f"{key} entry {i}", where)
    return faults


def _check_dtype(name: Any, what: str, where: str) -> str:
    if not isinstance(name, str) or name not in dtype_names():
        raise InputError(
            f"In {where}: {what} has an unknown dtype name {name!r} "
            "(expected a torch dtype name like 'bfloat16' or 'float8_e5m2')."
        )
    return name


def _dtype_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise InputError(f"In {where}: 'unsupported_dtypes' must be a list of dtype names.")
    return tuple(_check_dtype(d, f"unsupported_dtypes entry {i}", where) for i, d in enumerate(value))


def _collective_fault(index: int, entry: Any, where: str) -> CollectiveFault:
    what = f"collective_faults entry {index}"
    _object(entry, _COLLECTIVE_FAULT_KEYS, what, where)
    kind, dtype, value = _kind_dtype_value(entry, what, where, COLLECTIVE_FAULT_KINDS)
    op = entry["op"]
    if not isinstance(op, str) or not any(fnmatch.fnmatchcase(name, op) for name in COLLECTIVES):
        raise InputError(f"In {where}: {what} names an unknown collective {op!r} "
                         f"(known: {', '.join(COLLECTIVES)}; '*' globs allowed).")
    rank, peer = (entry.get(key) for key in ("rank", "peer"))
    for key, number in (("rank", rank), ("peer", peer)):
        if number is not None and (isinstance(number, bool) or not isinstance(number, int) or number < 0):
            raise InputError(f"In {where}: {what} needs {key!r} to be a rank number (0, 1, ...).")
    if peer is not None and not any(fnmatch.fnmatchcase(name, op) for name in POINT_TO_POINT):
        raise InputError(f"In {where}: {what} names a 'peer', which only a point-to-point op "
                         f"({', '.join(POINT_TO_POINT)}) has, not {op!r}.")
    return CollectiveFault(op=op, kind=kind, dtype=dtype, value=value, rank=rank, peer=peer)


def _fault(index: int, entry: Any, where: str, key: str = "faults") -> Fault:
    what = f"{key} entry {index}"
    _object(entry, _FAULT_KEYS, what, where)
    op = _check_op(entry.get("op"), what, where) if "op" in entry else None
    kind, dtype, value = _kind_dtype_value(entry, what, where)
    return Fault(op=op, kind=kind, dtype=dtype, value=value)


def _kind_dtype_value(entry: Mapping, what: str, where: str,
                      kinds: tuple[str, ...] = FAULT_KINDS) -> tuple[str, str | None, Any]:
    if "op" not in entry or "kind" not in entry:
        raise InputError(f"In {where}: {what} needs both 'op' and 'kind'.")
    kind = entry["kind"]
    if kind not in kinds:
        raise InputError(
            f"In {where}: {what} has unknown fault kind {kind!r} "
            f"(allowed: {', '.join(kinds)})."
        )
    dtype = entry.get("dtype")
    if dtype is not None:
        _check_dtype(dtype, what, where)
    value = entry.get("value")
    if kind in _VALUE_KINDS:
        ok = _VALUE_KINDS[kind]
        if value is None or isinstance(value, bool) or not isinstance(value, ok):
            need = {"raise": "a message string", "delay": "a number of seconds"}.get(kind, "a number")
            raise InputError(f"In {where}: {what} (kind {kind!r}) needs 'value' to be {need}.")
        if kind == "delay" and not (math.isfinite(value) and value >= 0):
            raise InputError(f"In {where}: {what} (kind 'delay') needs 'value' to be a finite number of seconds >= 0, not {value!r}.")
        if kind in ("scale", "offset") and not math.isfinite(value):
            raise InputError(f"In {where}: {what} (kind {kind!r}) needs a finite 'value', not {value!r}.")
        if kind == "scale" and value == 0:
            raise InputError(f"In {where}: {what} (kind 'scale') needs a non-zero 'value' (use kind 'offset' or 'nan' to wipe values).")
    elif kind in _OPTIONAL_VALUE_KINDS:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise InputError(f"In {where}: {what} (kind {kind!r}) takes as 'value' only {_OPTIONAL_VALUE_KINDS[kind]}, not {value!r}.")
    elif value is not None:
        raise InputError(f"In {where}: {what} (kind {kind!r}) takes no 'value'.")
    return kind, dtype, value
