"""JSON caches of facts derived from PyTorch's OpInfo database, one file per torch build.

Importing the op database takes seconds; what planning (conformance/opindex.py) and the
claims report (reports/api_map.py) need of it is small and changes only with torch. Each is
built once and kept as JSON under $NEURON_CHECK_CACHE (default ~/.cache/neuron-check), keyed
by the torch version and the OpInfo source file's size and mtime.
"""

from __future__ import annotations

import importlib.util
import json
import os
import zlib
from pathlib import Path
from typing import Any, Callable

OPINFO_MODULE = "torch.testing._internal.common_methods_invocations"


def load_or_build(kind: str, version: int, build: Callable[[], Any]) -> Any:
    """The cached value of `kind` (format `version`) for this torch build, else `build()`, cached.

    A cache that cannot be read or written only costs a rebuild; it is never an error."""
    stamp = _stamp(kind, version)
    path = cache_dir() / f"opinfo-{kind}-{zlib.crc32(stamp.encode()):08x}.json"
    try:
        data = json.loads(path.read_text())
        if data.get("stamp") == stamp:
            return data["value"]
    except (OSError, ValueError, KeyError):
        pass
    value = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"stamp": stamp, "value": value}))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home only costs the import next time
    return value


def cache_dir() -> Path:
    root = os.environ.get("NEURON_CHECK_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "neuron-check")
    return Path(root)


def _stamp(kind: str, version: int) -> str:
    import torch

    spec = importlib.util.find_spec(OPINFO_MODULE)
    origin = spec.origin if spec and spec.origin else ""
    stat = os.stat(origin) if origin else None
    size, mtime = (stat.st_size, int(stat.st_mtime)) if stat else (0, 0)
    return f"{kind}-{version}-{torch.__version__}-{size}-{mtime}"
