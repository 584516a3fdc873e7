"""`neuron-check ops` end to end: exit codes, summary, JUnit, bad input."""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from porting_cli.cli.app import main

PROFILES = Path(__file__).parents[1] / "conformance" / "profiles"


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def sim_profile(monkeypatch):
    """Use a sim profile by name; the CLI exports it to the environment, restored afterwards."""
    def use(name):
        path = str(PROFILES / f"{name}.json")
        monkeypatch.setenv("NEURON_CHECK_SIM_PROFILE", path)
        return path
    return use


@pytest.mark.parametrize("args, phrase", [
    (["--ops", "no_such_op_anywhere"], "matches no OpInfo op"),
    (["--ops", "mul", "--exclude", "zzz*"], "matches no OpInfo op"),
    (["--dtype", "fp99"], "unknown dtype"),
    (["--device", "warp-drive"], "unknown device"),
    (["--device", "cuda"], "not available"),
    (["--resume", "41"], "does not exist"),
    (["--shard", "3/2"], "--shard must be K/N"),
])
def test_bad_input_is_one_sentence_and_exit_2(tmp_path, args, phrase):
    result = invoke("ops", "--db", str(tmp_path / "r.db"), *args)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and phrase in lines[0] and "Traceback" not in result.output


def test_mismatch_fails_the_run_and_lands_in_junit(tmp_path, sim_profile):
    junit = tmp_path / "ops.xml"
    result = invoke("ops", "--device", "sim", "--sim-profile", sim_profile("scale_mul_bf16"), "--ops", "mul",
                    "--dtype", "fp32,bf16", "--max-samples", "3", "--db", str(tmp_path / "r.db"),
                    "--junit", str(junit), "--fail-on", "MISMATCH,ERROR")
    assert result.exit_code == 1, result.output
    assert "(simulated)" in result.output and "MISMATCH" in result.output
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert set(cases) == {"opinfo.mul.forward.float32.eager", "opinfo.mul.forward.bfloat16.eager"}
    assert cases["opinfo.mul.forward.bfloat16.eager"].find("failure").get("type") == "MISMATCH"
    assert cases["opinfo.mul.forward.float32.eager"].find("failure") is None


def test_strict_fallback_turns_fallback_into_failure(tmp_path, sim_profile):
    common = ["ops", "--device", "sim", "--sim-profile", sim_profile("fallback_median"), "--ops", "median",
              "--dtype", "fp32", "--max-samples", "2", "--db", str(tmp_path / "r.db"), "--fail-on", "MISMATCH"]
    lenient = invoke(*common)
    assert lenient.exit_code == 0, lenient.output
    assert "FALLBACK" in lenient.output
    # Resuming a finished run runs nothing and judges the stored results again.
    strict = invoke("ops", "--db", str(tmp_path / "r.db"), "--resume", "latest", "--fail-on", "MISMATCH",
                    "--strict-fallback")
    assert strict.exit_code == 1, strict.output
    assert "0 items" in strict.output


def test_a_run_stores_its_dispatcher_coverage_and_run_group(tmp_path, sim_profile):
    from op_db.store import Store

    db = tmp_path / "r.db"
    result = invoke("ops", "--device", "sim", "--sim-profile", sim_profile("fault_free"), "--ops", "abs",
                    "--dtype", "fp32", "--max-samples", "1", "--db", str(db), "--run-group", "nightly-42")
    assert result.exit_code == 0, result.output
    with Store.open(db, readonly=True) as store:
        assert store.run(1)["options"]["run_group"] == "nightly-42"
        kinds = dict(store.coverage(1))
    # sim registers a PrivateUse1 kernel per non-decomposing op; linear decomposes.
    assert kinds["aten.abs.default"] == "direct"
    assert kinds["aten.linear.default"] == "CompositeImplicitAutograd"
