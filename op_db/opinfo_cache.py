"""JSON caches of facts derived from PyTorch's OpInfo database, one file per torch build.

Importing the op database takes seconds; what planning (conformance/opindex.py) and the
claims report (reports/api_map.py) need of it is small and changes only with torch. Each is
built once and kept as JSON (op_db/json_cache.py), keyed by the torch version and the OpInfo
source file's size and mtime.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Callable

from op_db import json_cache

OPINFO_MODULE = "torch.testing._internal.common_methods_invocations"


def load_or_build(kind: str, version: int, build: Callable[[], Any]) -> Any:
    """The cached value of `kind` (format `version`) for this torch build, else `build()`, cached."""
    return json_cache.load_or_build(f"opinfo-{kind}", _stamp(kind, version), build)


def _stamp(kind: str, version: int) -> str:
    import torch

    spec = importlib.util.find_spec(OPINFO_MODULE)
    origin = spec.origin if spec and spec.origin else ""
    stat = os.stat(origin) if origin else None
    size, mtime = (stat.st_size, int(stat.st_mtime)) if stat else (0, 0)
    return f"{kind}-{version}-{torch.__version__}-{size}-{mtime}"
