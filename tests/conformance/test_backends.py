"""The backend registry: built-ins, plugins through entry points, the default rule."""

import sys
import textwrap

import pytest

from conformance import backends
from conformance.backends.base import BackendAdapter, fallback_op_from_warning
from op_db.errors import InputError

BUILTINS = ["neuron", "cuda", "xpu", "mps", "hpu", "npu", "meta", "cpu", "privateuseone", "sim"]


def test_every_builtin_is_registered():
    assert backends.names()[: len(BUILTINS)] == BUILTINS


@pytest.mark.parametrize("name", BUILTINS)
def test_describe_reports_the_interface(name):
    info = backends.get(name).describe()
    assert info["name"] == name
    assert set(info) == {
        "name", "device_type", "available", "device_count", "versions",
        "dispatch_key", "compile_backend", "simulated",
    }
    assert info["simulated"] is (name == "sim")


def test_cpu_and_meta_are_always_available():
    assert backends.get("cpu").init().is_available()
    assert backends.get("meta").describe()["device_count"] == 1


def test_unknown_device_is_one_sentence():
    with pytest.raises(InputError, match=r"unknown device 'tpu9'; known devices: neuron, cuda"):
        backends.get("tpu9")


def test_unavailable_device_refuses_init():
    with pytest.raises(InputError, match=r"device 'neuron' is not available: cannot import torch_neuronx"):
        backends.get("neuron").init()


def test_device_index_is_kept():
    adapter, device = backends.resolve("cpu:0")
    assert adapter.name == "cpu" and device == "cpu:0"
    with pytest.raises(InputError, match="bad index"):
        backends.resolve("cpu:x")


def test_default_rule_falls_back_to_sim_without_accelerators():
    assert backends.default_device() == "sim"


@pytest.fixture
def plugin_on_path(tmp_path, monkeypatch):
    """A third-party distribution that registers an adapter through the entry-point group."""
    (tmp_path / "acme_backend.py").write_text(textwrap.dedent("""
        from conformance.backends import BackendAdapter

        class AcmeAdapter(BackendAdapter):
            name = device_type = "acme"
            dispatch_key = "PrivateUse1"
            compile_backend = "acme_compiler"
            def is_available(self):
                return True
    """))
    dist = tmp_path / "acme_backend-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-backend\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[neuron_check.backends]\nacme = acme_backend:AcmeAdapter\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    backends.refresh()
    yield
    sys.modules.pop("acme_backend", None)
    backends.refresh()


def test_registry_finds_an_entry_point_adapter(plugin_on_path):
    assert "acme" in backends.names()
    adapter = backends.get("acme")
    assert isinstance(adapter, BackendAdapter)
    assert adapter.describe()["compile_backend"] == "acme_compiler"


@pytest.mark.parametrize(
    "text, op",
    [
        ("The operator 'aten::median' is not currently supported on the MPS backend and will fall back to run on the CPU.", "aten.median.default"),
        ("The operator 'aten::sort.stable' ... will fall back to run on the CPU", "aten.sort.stable"),
        ("some unrelated warning about aten::add", None),
    ],
)
def test_fallback_warnings_name_the_op(text, op):
    assert fallback_op_from_warning(text) == op
