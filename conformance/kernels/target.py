"""Import a kernel library (TARGET) and find the ops it registered.

TARGET is a path to a Python file (its folder goes on sys.path first, as when running a
script, so it can import its neighbours) or the name of an importable module. The ops found
are every op in the namespaces TARGET registered while it was imported (a namespace it only
added to counts too), plus the namespaces of whatever it declared a reference, samples or a
family for. One import per process: workers and the planner each load TARGET once.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import sys
from functools import lru_cache

from op_db.errors import InputError


@dataclasses.dataclass(frozen=True)
class LoadedTarget:
    target: str
    ops: tuple[str, ...]  # qualified names, "NS::NAME" (".overload" kept when not default)
    namespaces: tuple[str, ...]


@lru_cache(maxsize=None)
def load(target: str) -> LoadedTarget:
    """Import `target` once in this process and list its ops; InputError for anything the user
    must fix (no such file or module, an import that raises, no ops)."""
    import torch

    from conformance.kernels import declare

    before = set(torch._C._dispatch_get_all_op_names())
    declared_before = set(declare.REFERENCES) | set(declare.SAMPLES) | set(declare.FAMILIES)
    _import(target)
    after = set(torch._C._dispatch_get_all_op_names())
    declared = (set(declare.REFERENCES) | set(declare.SAMPLES) | set(declare.FAMILIES)) - declared_before
    namespaces = {_namespace(name) for name in (after - before) | declared}
    if not namespaces:
        raise InputError(f"{target} registered no custom ops: define them with torch.library.custom_op "
                         "or torch.library.Library(...).define while it is imported.")
    ops = sorted({_qualified(name) for name in after if _namespace(name) in namespaces})
    return LoadedTarget(target, tuple(ops), tuple(sorted(namespaces)))


def _import(target: str) -> None:
    if target.endswith(".py") or os.sep in target or "/" in target:
        path = os.path.abspath(target)
        if not os.path.isfile(path):
            raise InputError(f"no such file: {target}.")
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        name = "_neuron_check_kernels_target_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise InputError(f"{target} is not a Python file that can be imported.")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        _run(target, lambda: spec.loader.exec_module(module))
    else:
        _run(target, lambda: importlib.import_module(target))


def _run(target: str, load_module) -> None:
    try:
        load_module()
    except ModuleNotFoundError as exc:
        if exc.name and target.split(".")[0] == exc.name.split(".")[0]:
            raise InputError(f"no module named {target!r}: give a Python file or an importable module.") from None
        raise InputError(f"importing {target} failed: {type(exc).__name__}: {exc}.") from None
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"importing {target} failed: {type(exc).__name__}: {exc}.") from None


def _namespace(name: str) -> str:
    return name.split("::", 1)[0]


def _qualified(name: str) -> str:
    return name.removesuffix(".default")


def resolve(qualified: str):
    """The OpOverload for 'NS::NAME' or 'NS::NAME.overload'."""
    import torch

    namespace, _, rest = qualified.partition("::")
    name, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, namespace), name)
    return getattr(packet, overload or "default")
