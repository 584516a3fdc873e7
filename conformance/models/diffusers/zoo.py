"""The Diffusers zoo: every model class Diffusers exports (a `ModelMixin` subclass), tiny.

A class's subject is "diffusers:<ClassName>". Its tiny model is built from the class's own
default config (the `__init__` defaults that `register_to_config` records), shrunk by rule
(`shrink.py`), with the few fixes of `overrides.py`, and random weights drawn under a fixed
seed in float32. Nothing is downloaded. Wrappers of several models (MultiControlNetModel and
kin) hold two tiny models of the class they wrap.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
from typing import Any

from conformance.models.zoo import BuildError, _first_line

LIBRARY = "diffusers"
PREFIX = f"{LIBRARY}:"
# Wrapper argument -> how many tiny models it holds.
WRAPPED_COUNT = 2


@dataclasses.dataclass(frozen=True)
class DiffusersEntry:
    class_name: str
    module: str
    family: str
    modality: str

    @property
    def subject(self) -> str:
        return PREFIX + self.class_name

    # the census and the listing read these names off every zoo entry
    @property
    def model_type(self) -> str:
        return self.subject

    @property
    def task(self) -> str:
        return self.family

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "subject": self.subject, "task": self.family}


def quiet() -> None:
    """Diffusers' warnings off (a tiny model cast with .to() warns on every copy); a no-op without it."""
    try:
        from diffusers.utils import logging
    except ImportError:
        return
    logging.set_verbosity_error()


def is_diffusers(subject: str) -> bool:
    return subject.startswith(PREFIX)


def model_classes() -> dict[str, type]:
    """Every exported ModelMixin subclass, by name, sorted. This imports every module of
    Diffusers (its pipelines too: seconds a process); model_class(name) imports one."""
    import diffusers

    found = {name: model_class(name) for name in dir(diffusers)}
    return {name: cls for name, cls in sorted(found.items()) if cls is not None}


def model_class(name: str) -> type | None:
    """The exported ModelMixin subclass `name` (its own module imported only), else None."""
    import inspect

    import diffusers

    try:
        value = getattr(diffusers, name)
    except Exception:  # noqa: BLE001 - an export whose optional backend is missing is no model
        return None
    base = diffusers.ModelMixin
    return value if inspect.isclass(value) and issubclass(value, base) and value is not base else None


def _entry(name: str, cls: type) -> DiffusersEntry:
    from conformance.models.diffusers.families import family_of, modality_of
    from conformance.models.diffusers.shrink import default_config

    return DiffusersEntry(name, cls.__module__, family_of(name, cls.__module__, default_config(cls)),
                          modality_of(name, cls.__module__))


@functools.lru_cache(maxsize=1)
def catalogue() -> dict[str, DiffusersEntry]:
    """Every model class's entry, keyed by subject. Deriving it imports every module of
    Diffusers (seconds of CPU), so the entries are cached per installed Diffusers and per
    version of the rules here that classify them (op_db/json_cache.py)."""
    from op_db.json_cache import load_or_build

    stamp = _catalogue_stamp()
    if stamp is None:  # not installed: the import below says so
        rows = _catalogue_rows()
    else:
        rows = load_or_build("diffusers-catalogue", stamp, _catalogue_rows)
    entries = (DiffusersEntry(*row) for row in rows)
    return {entry.subject: entry for entry in entries}


def _catalogue_rows() -> list[list[str]]:
    rows = (_entry(name, cls) for name, cls in model_classes().items())
    return [[e.class_name, e.module, e.family, e.modality] for e in rows]


def _catalogue_stamp() -> str | None:
    """The installed Diffusers (version, and its package file, for an editable install) and the
    source of the modules that classify its classes, without importing Diffusers."""
    import importlib.metadata
    import importlib.util
    from pathlib import Path

    from op_db.json_cache import file_stamp

    spec = importlib.util.find_spec("diffusers")
    if spec is None or not spec.origin:
        return None
    try:
        version = importlib.metadata.version("diffusers")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    here = Path(__file__).resolve().parent
    rules = [str(here / name) for name in ("zoo.py", "families.py", "shrink.py", "geometry.py")]
    return f"1-{version}-{file_stamp(spec.origin, *rules)}"


@functools.lru_cache(maxsize=None)
def entry_of(subject: str) -> DiffusersEntry | None:
    """catalogue().get(subject) without the whole catalogue: what a worker running one item
    needs (the catalogue's imports would cost it seconds of CPU)."""
    name = subject.removeprefix(PREFIX)
    cls = model_class(name) if is_diffusers(subject) else None
    return None if cls is None else _entry(name, cls)


GLOB = "*?["  # what makes an --arch pattern a glob (fnmatch)
_NO_MATCH = "no Diffusers model class matches {pattern}; see `neuron-check models --library diffusers --list`."


def select(archs: list[str] | None = None, families: list[str] | None = None) -> list[DiffusersEntry]:
    """Entries whose class name matches any of `archs` (names or globs) in any of `families`;
    raises InputError naming the known families for an unknown one."""
    from conformance.models.diffusers.families import FAMILIES
    from op_db.errors import InputError

    for family in families or []:
        if family not in FAMILIES:
            raise InputError(f"unknown family {family!r}; known families: {', '.join(FAMILIES)}.")
    if archs and not families and not any(set(GLOB) & set(pattern) for pattern in archs):
        # Class names only: their entries, without importing every module for the catalogue.
        exact = {pattern: entry_of(PREFIX + pattern.removeprefix(PREFIX)) for pattern in archs}
        for pattern, entry in exact.items():
            if entry is None:
                raise InputError(_NO_MATCH.format(pattern=repr(pattern)))
        return sorted({e.subject: e for e in exact.values()}.values(), key=lambda e: e.subject)
    chosen = [e for e in catalogue().values() if not families or e.family in families]
    for pattern in archs or []:
        name = pattern.removeprefix(PREFIX)
        if not any(fnmatch.fnmatchcase(e.class_name, name) for e in catalogue().values()):
            raise InputError(_NO_MATCH.format(pattern=repr(pattern)))
    if archs:
        names = [p.removeprefix(PREFIX) for p in archs]
        chosen = [e for e in chosen if any(fnmatch.fnmatchcase(e.class_name, n) for n in names)]
    return chosen


def tiny_config(cls: type) -> dict[str, Any]:
    """The constructor kwargs of `cls`'s tiny model (raises BuildError)."""
    from conformance.models.diffusers.overrides import OVERRIDES, SKIP
    from conformance.models.diffusers.shrink import default_config, shrink

    if cls.__name__ in SKIP:
        raise BuildError(SKIP[cls.__name__])
    values = default_config(cls)
    kwargs = {**shrink(values), **OVERRIDES.get(cls.__name__, {})}
    return {k: v for k, v in {**values, **kwargs}.items() if v is not _EMPTY()}


def _EMPTY():
    import inspect

    return inspect.Parameter.empty


def build_model(entry: DiffusersEntry, seed: int = 0) -> Any:
    """The tiny model of `entry`: float32, random weights under `seed`, eval mode, on CPU."""
    import torch

    cls = model_class(entry.class_name)
    try:
        torch.manual_seed(seed)
        model = _instantiate(cls, seed)
    except BuildError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure is this class's build status
        raise BuildError(f"model: {type(exc).__name__}: {_first_line(exc)}") from exc
    return model.to(torch.float32).eval()


def _instantiate(cls: type, seed: int) -> Any:
    import torch

    from conformance.models.diffusers.overrides import WRAPPED_MODELS
    from conformance.models.diffusers.shrink import default_config

    kwargs = tiny_config(cls)
    required = [k for k, v in default_config(cls).items() if v is _EMPTY() and k not in kwargs]
    for key in required:
        wrapped = _wrapped_class(cls)
        if wrapped is None:
            raise BuildError(f"config: the constructor requires {key!r}, which has no default")
        parts = []
        for index in range(WRAPPED_MODELS.get(cls.__name__, WRAPPED_COUNT)):
            torch.manual_seed(seed + index)
            parts.append(wrapped(**tiny_config(wrapped)))
        kwargs[key] = parts
    return _with_companion(cls(**kwargs), seed)


def _with_companion(model: Any, seed: int) -> Any:
    """`model` with the modules it shares with its companion model attached (overrides.COMPANIONS)."""
    import torch

    from conformance.models.diffusers.overrides import COMPANIONS

    if type(model).__name__ not in COMPANIONS:
        return model
    companion_name, attach = COMPANIONS[type(model).__name__]
    companion_cls = model_class(companion_name)
    torch.manual_seed(seed + 1)
    return getattr(type(model), attach)(model, companion_cls(**tiny_config(companion_cls)))


def _wrapped_class(cls: type) -> type | None:
    """The class a Multi* wrapper holds: its name without "Multi" (MultiAdapter -> T2IAdapter)."""
    if "Multi" not in cls.__name__:
        return None
    name = cls.__name__.replace("Multi", "")
    if name == "Adapter":
        name = "T2IAdapter"
    return model_class(name)
