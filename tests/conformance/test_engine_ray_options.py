"""The Ray executor's resource mapping and the --executor/--ray-address options; no Ray
instance is started here (tests/conformance/test_engine_ray.py runs one)."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from conformance.engine import ray as engine_ray
from conformance.engine.config import RunConfig
from op_db.errors import InputError
from porting_cli.cli.app import main


@pytest.mark.parametrize(("backend", "expected"), [
    ("cuda", {"CPU": 1, "GPU": 1}),
    ("neuron", {"CPU": 1, "neuron_cores": 1}),
    ("sim", {"CPU": 1}),
    ("meta", {"CPU": 1}),
    ("some_plugin", {"CPU": 1}),
])
def test_each_backend_asks_ray_for_one_device(backend, expected, monkeypatch):
    monkeypatch.delenv(engine_ray.RESOURCES_ENV, raising=False)
    assert engine_ray.actor_resources(backend) == expected


def test_resource_override_and_its_options(monkeypatch):
    monkeypatch.setenv(engine_ray.RESOURCES_ENV, '{"CPU": 2, "my_chip": 1}')
    resources = engine_ray.actor_resources("some_plugin")
    assert engine_ray.ray_options(resources) == {"num_cpus": 2, "num_gpus": 0, "resources": {"my_chip": 1}}
    monkeypatch.setenv(engine_ray.RESOURCES_ENV, '["CPU"]')
    with pytest.raises(InputError, match=engine_ray.RESOURCES_ENV):
        engine_ray.actor_resources("some_plugin")


def test_capacity_counts_whole_devices():
    neuron = engine_ray.actor_resources("neuron")
    assert engine_ray.actor_capacity({"CPU": 128.0, "neuron_cores": 64.0}, neuron) == 64
    assert engine_ray.actor_capacity({"CPU": 2.0}, neuron) == 0
    assert engine_ray.actor_capacity({"CPU": 2.0}, engine_ray.actor_resources("sim")) == 2


def test_pinned_device_is_index_zero_in_its_actor(monkeypatch):
    monkeypatch.delenv(engine_ray.RESOURCES_ENV, raising=False)
    config = RunConfig(backend="cuda", device="cuda:3")
    assert engine_ray.actor_config(config, engine_ray.actor_resources("cuda")).device == "cuda"
    sim = RunConfig(backend="sim", device="sim")
    assert engine_ray.actor_config(sim, engine_ray.actor_resources("sim")) is sim


def test_workers_get_the_sim_profile_and_checkout(monkeypatch):
    monkeypatch.setenv("NEURON_CHECK_DB", "/tmp/x.db")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # Ray's to set per actor, never copied
    env = engine_ray.forwarded_env(RunConfig(backend="sim", device="sim", sim_profile="/p.json"), started_here=True)
    assert env["NEURON_CHECK_SIM_PROFILE"] == "/p.json" and env["NEURON_CHECK_DB"] == "/tmp/x.db"
    assert "CUDA_VISIBLE_DEVICES" not in env
    assert str(engine_ray.Path(engine_ray.__file__).resolve().parents[2]) in env["PYTHONPATH"]


def test_missing_ray_is_one_sentence(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(InputError, match=r"pip install 'neuron-check\[ray\]'"):
        engine_ray.RayExecutor().execute([], RunConfig(backend="sim", device="sim", executor="ray"), print)


@pytest.fixture
def captured_config(monkeypatch):
    """Stop `ops`/`models` just before running: the RunConfig they built."""
    seen = {}

    def fake_run(items, config, *args, **kwargs):
        seen["config"] = config
        raise SystemExit(0)

    monkeypatch.delenv("NEURON_CHECK_SIM_PROFILE", raising=False)
    monkeypatch.setattr("conformance.engine.local.run_items", fake_run)
    monkeypatch.setattr(engine_ray.RayExecutor, "connect", lambda self, config: None)  # no cluster here
    return seen


@pytest.mark.parametrize(("flags", "executor", "address"), [
    ([], "local", None),
    (["--executor", "ray"], "ray", None),
    (["--ray-address", "auto"], "ray", "auto"),
])
def test_ops_passes_the_executor_on(flags, executor, address, captured_config, tmp_path):
    args = ["ops", "--device", "sim", "--ops", "abs", "--dtype", "fp32", "--db", str(tmp_path / "o.db"), *flags]
    outcome = CliRunner().invoke(main, args)
    assert outcome.exit_code == 0, outcome.output
    assert (captured_config["config"].executor, captured_config["config"].ray_address) == (executor, address)


def test_models_passes_the_executor_on(captured_config, tmp_path):
    args = ["models", "--device", "sim", "--arch", "llama", "--dtype", "fp32", "--db", str(tmp_path / "m.db"),
            "--executor", "ray", "--ray-address", "10.0.0.1:6379"]
    outcome = CliRunner().invoke(main, args)
    assert outcome.exit_code == 0, outcome.output
    assert (captured_config["config"].executor, captured_config["config"].ray_address) == ("ray", "10.0.0.1:6379")


def test_ray_address_with_the_local_executor_is_a_usage_error(tmp_path):
    outcome = CliRunner().invoke(main, ["ops", "--device", "sim", "--ops", "abs", "--executor", "local",
                                        "--ray-address", "auto", "--db", str(tmp_path / "o.db")])
    assert outcome.exit_code == 2
    assert "--ray-address applies only to --executor ray" in outcome.output
