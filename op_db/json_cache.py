"""Small JSON caches of facts that are slow to derive and change only with an installed package.

Each value is kept as one JSON file under $NEURON_CHECK_CACHE (default ~/.cache/neuron-check),
with the stamp it was built under: a stamp that no longer matches (another package version,
another source of the rules that derived it) rebuilds it. A cache that cannot be read or
written only costs a rebuild; it is never an error.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import Any, Callable


def load_or_build(name: str, stamp: str, build: Callable[[], Any]) -> Any:
    """The value cached as `name` under `stamp`, else `build()`, cached."""
    path = cache_dir() / f"{name}-{zlib.crc32(stamp.encode()):08x}.json"
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
        pass  # a read-only home only costs the work next time
    return value


def cache_dir() -> Path:
    root = os.environ.get("NEURON_CHECK_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "neuron-check")
    return Path(root)


def file_stamp(*paths: str) -> str:
    """Size, mtime and a checksum of the text of each file: what changes when it is edited or
    another version is installed over it."""
    parts = []
    for path in paths:
        try:
            data = Path(path).read_bytes()
            parts.append(f"{len(data)}:{int(os.stat(path).st_mtime)}:{zlib.crc32(data):08x}")
        except OSError:
            parts.append("missing")
    return "/".join(parts)
