"""The OpInfo index: what planning needs of each OpInfo entry, cached per torch build.

Planning needs a little of what OpInfo knows about each op (its full name, the dtypes the
CPU supports, whether it has autograd). Importing PyTorch's op database takes seconds, so
that index is cached as JSON per torch build; planning a run is then instant and the worker
processes, which must import the database anyway, start at once. (Dtype claims are judged
in the worker, which holds the OpInfo: conformance/opinfo/checks.py, `claim_device_type`.)
Both the OpInfo suite and the FP8 suite (for the OpInfo entries that list FP8) read it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import zlib
from pathlib import Path
from typing import Any

_INDEX_FORMAT = 2
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
