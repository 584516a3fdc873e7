"""Which OpInfo entries a public PyTorch API name means, from OpInfo's own fields.

A vendor table names APIs (`torch.add`, `torch.nn.functional.layer_norm`,
`Tensor.add_`); the OpInfo suite measures OpInfo entries (`add`,
`nn.functional.layer_norm`, `div.floor_rounding`). Every OpInfo entry is
reached by the names it declares:

* `torch.` + its name (`torch.linalg.norm`, `torch.nn.functional.relu`);
* its op function's public module and `__name__` (`torch.nn.functional.layer_norm`);
* `torch.` + each alias (`torch.multiply`);
* `Tensor.` + its method variant's and in-place variant's `__name__` (`Tensor.add`, `Tensor.add_`).

Importing PyTorch's op database takes seconds, so the map is built once per
torch build and cached as JSON beside the planning index
($NEURON_CHECK_CACHE or ~/.cache/neuron-check).
"""

from __future__ import annotations

from typing import Any

from op_db.opinfo_cache import OPINFO_MODULE, load_or_build

CACHE_FORMAT = 1


def canonical_api(name: str) -> str:
    """Spellings of one API made equal: 'F.relu', 'nn.functional.relu()' and
    'torch.nn.functional.relu' are the same; 'torch.Tensor.add_' is 'Tensor.add_'."""
    name = name.strip().removesuffix("()").strip()
    for prefix, replacement in (("torch.Tensor.", "Tensor."), ("F.", "torch.nn.functional."),
                                ("nn.functional.", "torch.nn.functional."), ("torch.F.", "torch.nn.functional.")):
        if name.startswith(prefix):
            name = replacement + name[len(prefix):]
            break
    if not name.startswith(("torch.", "Tensor.")):
        name = "torch." + name
    return name


def apis_of(op: Any) -> list[str]:
    """The public API names of one OpInfo entry, most specific first (the first is what
    `claims export` publishes)."""
    names: list[str] = []

    def add(name: str | None) -> None:
        if name and name not in names:
            names.append(name)

    function = getattr(op, "op", None)
    module = getattr(function, "__module__", None) or ""
    fn_name = getattr(function, "__name__", None)
    public = module == "torch" or (module.startswith("torch.") and "._" not in module and not module.startswith("torch._"))
    if public and fn_name and not fn_name.startswith("_") and fn_name != "<lambda>":
        add(f"{module}.{fn_name}")
    add(f"torch.{op.name}")
    for alias in getattr(op, "aliases", ()) or ():
        add(f"torch.{alias.name}")
    for variant in (getattr(op, "method_variant", None), getattr(op, "inplace_variant", None)):
        variant_name = getattr(variant, "__name__", None)
        if variant_name and not variant_name.startswith("_") and variant_name != "<lambda>":
            add(f"Tensor.{variant_name}")
    return names


def build_api_map(op_db: list[Any]) -> dict[str, list[str]]:
    """OpInfo full name -> its API names."""
    return {op.full_name: apis_of(op) for op in op_db}


class ApiIndex:
    """API name -> OpInfo full names, and back."""

    def __init__(self, api_map: dict[str, list[str]]):
        self.apis_by_opinfo = api_map
        self._opinfos_by_api: dict[str, list[str]] = {}
        for full_name, apis in api_map.items():
            for api in apis:
                self._opinfos_by_api.setdefault(api, []).append(full_name)

    def opinfos(self, api: str) -> list[str]:
        """OpInfo full names an API (any spelling `canonical_api` accepts) maps to; [] if none."""
        return list(self._opinfos_by_api.get(canonical_api(api), ()))

    def primary_api(self, full_name: str) -> str:
        apis = self.apis_by_opinfo.get(full_name)
        return apis[0] if apis else canonical_api(full_name)


_memo: ApiIndex | None = None


def api_index() -> ApiIndex:
    """The index for this torch build: from the cache, else built from op_db and cached."""
    global _memo
    if _memo is None:
        _memo = ApiIndex(load_or_build("apis", CACHE_FORMAT, _build_from_op_db))
    return _memo


def _build_from_op_db() -> dict[str, list[str]]:
    import importlib

    return build_api_map(importlib.import_module(OPINFO_MODULE).op_db)
