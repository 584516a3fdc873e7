"""Exporting a measured run as a sim profile."""

import json

from op_db.profile import export_profile, profile_from_results
from op_db.sample import result, sample_results, write_sample_run
from op_db.store import Store


def test_profile_lists_measured_unsupported_and_fallback_ops():
    profile = profile_from_results(sample_results(), "p")
    assert profile == {
        "name": "p",
        "unsupported_ops": ["aten.cumprod.default"],
        "fallback_ops": ["aten.median.default"],
        "unsupported_dtypes": [],
    }


def test_a_dtype_is_unsupported_only_when_every_judged_item_is():
    results = [
        result("add", "float64", "UNSUPPORTED", failing_op="aten.add.Tensor"),
        result("mul", "float64", "UNSUPPORTED", failing_op="aten.mul.Tensor"),
        result("nonzero", "float64", "SKIP"),
        result("add", "float16", "UNSUPPORTED", failing_op="aten.add.Tensor"),
        result("mul", "float16", "PASS"),
    ]
    assert profile_from_results(results, "p")["unsupported_dtypes"] == ["float64"]


def test_exported_profile_loads_in_sim(tmp_path):
    import conformance.sim as sim

    with Store.open(tmp_path / "a.db") as store:
        write_sample_run(store)
        export_profile(store, "latest", tmp_path / "p.json")
    loaded = sim.load_profile(tmp_path / "p.json")
    assert loaded.is_unsupported_op("aten.cumprod.default")
    assert loaded.is_fallback_op("aten.median.default")
    assert "run 1 on sim" in json.loads((tmp_path / "p.json").read_text())["name"]
