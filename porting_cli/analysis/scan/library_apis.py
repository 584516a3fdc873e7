"""APIs of other packages that need a CUDA-only library, known from data.

``cuda_library_apis.json`` (beside this file) lists framework APIs whose use pulls in a library
of ``cuda_libraries.json``: Lightning's ``BitsandbytesPrecision`` imports bitsandbytes when it is
built, Accelerate's ``load_and_quantize_model`` replaces layers with bitsandbytes ones, Diffusers'
``enable_xformers_memory_efficient_attention()`` runs xformers kernels. The script never imports
the library itself, so only this data can tell. Each entry says where in the package's source the
dependency was read.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

DATA = Path(__file__).with_name("cuda_library_apis.json")


@dataclasses.dataclass(frozen=True)
class LibraryApi:
    name: str  # the API's own name (a class, function or method)
    requires: str  # an import name of cuda_libraries.json
    found: str  # where the dependency was read


@functools.cache
def _table() -> tuple[dict[tuple[str, str], LibraryApi], dict[str, LibraryApi]]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    by_package: dict[tuple[str, str], LibraryApi] = {}
    by_method: dict[str, LibraryApi] = {}
    for entry in data["apis"]:
        name = entry.get("name") or entry["method"]
        api = LibraryApi(name, entry["requires"], entry["found"])
        if "method" in entry:
            by_method[name] = api
        for package in entry.get("packages", ()):
            by_package[(package, name)] = api
    return by_package, by_method


def api_for(qualified: str) -> LibraryApi | None:
    """The entry for a dotted name that resolved through the file's imports
    (``lightning.fabric.plugins.BitsandbytesPrecision``): its top-level package and its last part."""
    top, _, rest = qualified.partition(".")
    if not rest:
        return None
    return _table()[0].get((top, rest.rpartition(".")[2]))


def method_api(attribute: str) -> LibraryApi | None:
    """The entry for a method called on an object of a package (``pipe.<attribute>()``)."""
    return _table()[1].get(attribute)


def api_names() -> tuple[str, ...]:
    """Every name the data knows: the scanner's triggers."""
    by_package, by_method = _table()
    return tuple(sorted({name for _, name in by_package} | set(by_method)))
