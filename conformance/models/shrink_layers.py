"""Which layers a tiny config keeps, and the fields that name layers by index following them.

A stack is cut to one layer of each kind (`shrink.py`); configs whose layers read another
layer's K/V by index (`kv_source_layers`: layer i reads layer v[i] <= i) or list layers by index
(`index_layers`, `mlp_only_layers`) must name the kept layers by their new indices, and a layer
that reads another's K/V needs that layer kept too.
"""

from __future__ import annotations

from typing import Any

# Lists naming each layer's kind, and the layer counts they must match.
LAYER_LIST_KEYS = ("layer_types", "layers_block_type", "block_types")
LAYER_COUNT_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers")
INDEX_SUFFIX = "_layers"


def kept_layers(values: dict[str, Any]) -> tuple[str, int, list[int]] | None:
    """(layer-count key, original count, original indices to keep): one layer of each kind in
    `layer_types` and the other per-layer kind lists together (first occurrence, in order; hybrids
    keep an attention layer, MoE stacks a sparse one), at least two; with a layer that reads an
    earlier layer's K/V, that pair too, so the sharing stays in play."""
    count_key = next((k for k in LAYER_COUNT_KEYS if isinstance(values.get(k), int)), None)
    if count_key is None or values[count_key] < 2:
        return None
    total = values[count_key]
    # each layer's kind in every per-layer list of names (attention kind, dense/sparse MLP, ...)
    lists = [values[k] for k in sorted(values) if isinstance(values[k], list) and len(values[k]) == total
             and all(isinstance(v, str) for v in values[k]) and (k in LAYER_LIST_KEYS or k.endswith("_types"))]
    kinds = list(zip(*lists)) if lists else None
    kept = list({kind: i for i, kind in reversed(list(enumerate(kinds)))}.values()) if kinds else []
    for i in range(total):
        if len(kept) >= 2:
            break
        if i not in kept:
            kept.append(i)
    for sources in _source_lists(values, total).values():
        readers = [i for i, source in enumerate(sources) if source != i]
        kept += readers[:1] if readers and not any(sources[i] != i for i in kept) else []
        kept += [sources[i] for i in kept]
    return count_key, total, sorted(set(kept))


def _ints(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, int) and not isinstance(v, bool)
                                                           for v in value)


def _source_lists(values: dict[str, Any], total: int) -> dict[str, list[int]]:
    """Per-layer lists of the earlier (or own) layer each layer reads, by index."""
    return {key: value for key, value in values.items() if key.endswith(INDEX_SUFFIX) and _ints(value)
            and len(value) == total and all(0 <= v <= i for i, v in enumerate(value))}


def layer_indices_follow_kept(values: dict[str, Any], total: int, kept: list[int]) -> dict[str, Any]:
    """Source lists and increasing lists of layer indices renumbered to the kept layers; a list
    none of whose layers is kept stays as it was (it names no tiny layer either way)."""
    new = {old: i for i, old in enumerate(kept)}
    out: dict[str, Any] = {}
    for key, value in _source_lists(values, total).items():
        out[key] = [new[value[i]] for i in kept]
    for key, value in values.items():
        if key in out or not key.endswith(INDEX_SUFFIX) or not _ints(value) or len(value) == total:
            continue
        if value == sorted(set(value)) and all(0 <= v < total for v in value) and new.keys() & set(value):
            out[key] = [new[v] for v in value if v in new]
    return out
