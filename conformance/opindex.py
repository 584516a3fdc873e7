"""The OpInfo index: what planning needs of each OpInfo entry, cached per torch build.

Planning needs a little of what OpInfo knows about each op (its full name, the dtypes the
CPU supports, whether it has autograd). Importing PyTorch's op database takes seconds, so
that index is cached as JSON per torch build; planning a run is then instant and the worker
processes, which must import the database anyway, start at once. (Dtype claims are judged
in the worker, which holds the OpInfo: conformance/opinfo/checks.py, `claim_device_type`.)
Both the OpInfo suite and the FP8 suite (for the OpInfo entries that list FP8) read it.
"""

from __future__ import annotations

from typing import Any

from op_db.opinfo_cache import load_or_build

_INDEX_FORMAT = 2
_index_memo: list[dict[str, Any]] | None = None


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
    if _index_memo is None:
        _index_memo = load_or_build("index", _INDEX_FORMAT, _build_from_op_db)
    return _index_memo


def _build_from_op_db() -> list[dict[str, Any]]:
    from torch.testing._internal.common_methods_invocations import op_db

    return build_index(op_db)
