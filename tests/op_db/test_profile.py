"""Exporting a measured run as a sim profile."""

import json
import os
import subprocess
import sys

import pytest

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


@pytest.mark.slow
def test_a_profile_exported_from_a_sim_run_recovers_the_injected_coverage(tmp_path):
    """Inject coverage gaps through a sim profile, measure them with `ops`, export them back."""
    import conformance.sim as sim

    injected = tmp_path / "injected.json"
    injected.write_text(json.dumps({"name": "gaps", "unsupported_ops": ["aten.cumprod.default"],
                                    "fallback_ops": ["aten.median.default"]}))
    db, exported = tmp_path / "run.db", tmp_path / "exported.json"
    env = {k: v for k, v in os.environ.items() if k != "NEURON_CHECK_SIM_PROFILE"}
    ops = subprocess.run(
        [sys.executable, "-m", "porting_cli", "ops", "--db", str(db), "--device", "sim", "--sim-profile",
         str(injected), "--ops", "cumprod,median,add", "--dtype", "float32"],
        capture_output=True, text=True, timeout=240, env=env,
    )
    assert ops.returncode == 0, ops.stderr[-2000:]
    with Store.open(db, readonly=True) as store:
        statuses = {r.subject: r.status.value for r in store.results(1)}
        assert statuses == {"add": "PASS", "cumprod": "UNSUPPORTED", "median": "FALLBACK"}
        export_profile(store, 1, exported)
    loaded = sim.load_profile(exported)
    assert loaded.unsupported_ops == ("aten.cumprod.default",)
    assert loaded.fallback_ops == ("aten.median.default",)
