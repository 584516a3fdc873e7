"""Dispatcher registration coverage, checked on ops registered by the test itself."""

import pytest
import torch

from op_db.errors import InputError
from op_db.inventory import KINDS, coverage_summary, dispatcher_coverage, overload_name, store_coverage
from op_db.sample import write_sample_run
from op_db.store import Store


@pytest.fixture(scope="module")
def test_ops():
    lib = torch.library.Library("nc_inventory", "DEF")
    for name in ("direct", "explicit", "implicit", "nothing"):
        lib.define(f"{name}(Tensor x) -> Tensor")
    lib.impl("direct", lambda x: x.clone(), "CPU")
    lib.impl("explicit", lambda x: x.clone(), "CompositeExplicitAutograd")
    lib.impl("implicit", lambda x: x * 1, "CompositeImplicitAutograd")
    yield lib
    lib._destroy()


def kinds(key):
    return dict(dispatcher_coverage(key, namespace="nc_inventory"))


def test_precedence_and_missing_on_a_key_without_fallback(test_ops):
    assert kinds("CPU") == {
        "nc_inventory.direct.default": "direct",
        "nc_inventory.explicit.default": "CompositeExplicitAutograd",
        "nc_inventory.implicit.default": "CompositeImplicitAutograd",
        "nc_inventory.nothing.default": "missing",
    }


def test_a_backend_fallback_makes_unregistered_ops_fallback_not_supported(test_ops):
    # Meta registers a backend fallback; a CPU-only kernel is not a Meta kernel.
    found = kinds("Meta")
    assert found["nc_inventory.nothing.default"] == "fallback"
    assert found["nc_inventory.direct.default"] == "fallback"
    assert found["nc_inventory.implicit.default"] == "CompositeImplicitAutograd"


def test_aten_on_cpu_has_every_kind_of_registration():
    rows = dict(dispatcher_coverage("CPU"))
    assert rows["aten.add.Tensor"] == "direct"
    assert rows["aten.linear.default"] == "CompositeImplicitAutograd"
    assert set(coverage_summary(rows.items())) == set(KINDS)


def test_unknown_dispatch_key_is_an_input_error():
    with pytest.raises(InputError):
        dispatcher_coverage("NoSuchKey")


@pytest.mark.parametrize("name, expected", [
    ("aten::add.Tensor", "aten.add.Tensor"), ("aten::cumprod", "aten.cumprod.default"),
])
def test_overload_names_match_str_of_op_overload(name, expected):
    assert overload_name(name) == expected


def test_store_coverage_records_the_table_with_the_run(tmp_path):
    class CpuLike:
        dispatch_key = "CPU"

        def coverage_profile(self):
            return None

    with Store.open(tmp_path / "a.db") as store:
        run_id = write_sample_run(store)
        count = store_coverage(store, run_id, CpuLike())
        stored = dict(store.coverage(run_id))
    assert count == len(stored) > 1000
    assert stored["aten.add.Tensor"] == "direct"
