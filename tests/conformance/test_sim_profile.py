"""Sim profiles: validation, and each profile behaviour and fault kind doing exactly its job."""

from __future__ import annotations

import json
import signal
import time
import warnings

import pytest

from op_db.errors import InputError

torch = pytest.importorskip("torch")


# ---- loading and validation -------------------------------------------------------------

def test_load_from_dict_and_file(sim_device, tmp_path):
    data = {
        "name": "example",
        "unsupported_ops": ["aten.cumprod.default", "aten.sort.*"],
        "fallback_ops": ["aten.median.default"],
        "unsupported_dtypes": ["float64", "complex128"],
        "faults": [
            {"op": "aten.mul.Tensor", "dtype": "bfloat16", "kind": "scale", "value": 1.05},
            {"op": "aten.tanh.default", "kind": "raise", "value": "boom"},
            {"op": "aten.exp.default", "kind": "nan"},
        ],
    }
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    for source in (data, path, str(path)):
        prof = sim_device.load_profile(source)
        assert prof.name == "example"
        assert prof.is_unsupported_op("aten.sort.stable")
        assert not prof.is_unsupported_op("aten.argsort.default")
        assert prof.is_fallback_op("aten.median.default")
        assert [f.kind for f in prof.faults] == ["scale", "raise", "nan"]
        assert prof.faults[0].dtype == "bfloat16"
    assert sim_device.load_profile(prof.to_dict()) == prof
    assert sim_device.load_profile({}).faults == ()


@pytest.mark.parametrize(
    "data, words",
    [
        ({"bogus": 1}, ["unknown key", "bogus"]),
        ({"faults": [{"op": "aten.add.Tensor", "kind": "offset", "value": 1},
                     {"op": "aten.mul.Tensor", "kind": "explode"}]}, ["faults entry 1", "explode"]),
        ({"faults": [{"op": "aten.mul.Tensor", "kind": "scale"}]}, ["faults entry 0", "value"]),
        ({"faults": [{"op": "aten.mul.Tensor", "kind": "delay", "value": -1}]}, ["faults entry 0", "seconds >= 0"]),
        ({"faults": [{"op": "aten.mul.Tensor", "kind": "nan", "extra": 1}]}, ["faults entry 0", "extra"]),
        ({"faults": [{"op": "aten.mul.Tensor", "kind": "nan", "dtype": "float33"}]}, ["faults entry 0", "float33"]),
        ({"unsupported_dtypes": ["bfloat17"]}, ["unsupported_dtypes entry 0", "bfloat17"]),
        ({"unsupported_ops": ["aten.mul.Tensor", "aten mul[x"]}, ["unsupported_ops entry 1", "aten mul[x"]),
        ({"fallback_ops": "aten.median.default"}, ["fallback_ops", "list"]),
        ([1, 2], ["top level"]),
    ],
)
def test_invalid_profiles_name_the_problem(sim_device, data, words):
    with pytest.raises(InputError) as info:
        sim_device.load_profile(data)
    msg = str(info.value)
    for w in words:
        assert w in msg
    assert "\n" not in msg


def test_missing_file_and_bad_json(sim_device, tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        sim_device.load_profile(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        sim_device.load_profile(bad)


def test_set_and_active_profile(sim_device):
    assert sim_device.active_profile() is None
    prof = sim_device.load_profile({"name": "x"})
    sim_device.set_profile(prof)
    try:
        assert sim_device.active_profile() is prof
    finally:
        sim_device.set_profile(None)
    assert sim_device.active_profile() is None


# ---- behaviours -------------------------------------------------------------------------

def test_unsupported_op_raises_the_dispatcher_text(use_profile):
    use_profile({"unsupported_ops": ["aten.mul.*"]})
    x = torch.ones(3, device="sim")
    with pytest.raises(NotImplementedError) as info:
        x * x
    assert str(info.value).startswith(
        "Could not run 'aten::mul.Tensor' with arguments from the 'sim' backend."
    )
    assert torch.equal((x + x).cpu(), torch.full((3,), 2.0))


def test_unsupported_dtype_on_create_and_consume(use_profile):
    x64 = torch.ones(2, dtype=torch.float64, device="sim")  # made before the profile
    use_profile({"unsupported_dtypes": ["float64"]})
    for make in (lambda: torch.ones(2, dtype=torch.float64).to("sim"),
                 lambda: torch.zeros(2, dtype=torch.float64, device="sim"),
                 lambda: torch.ones(2, device="sim").double(),
                 lambda: x64 + 1):
        with pytest.raises(RuntimeError, match="float64 is not supported"):
            make()
    assert torch.ones(2, device="sim").sum().item() == 2.0


def test_fallback_op_warns_logs_and_is_correct(use_profile, sim_device):
    use_profile({"fallback_ops": ["aten.median.default"]})
    x = torch.tensor([3.0, 1.0, 2.0])
    with pytest.warns(UserWarning, match="'aten::median' is not currently supported on the sim "
                                         "device and will fall back to run on the CPU"):
        out = x.to("sim").median()
    assert out.item() == 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x.to("sim").median()
    assert sim_device.fallback_log() == {"aten.median.default": 2}
    sim_device.reset_fallback_log()
    assert not sim_device.fallback_log()


@pytest.mark.parametrize(
    "kind, value, expected",
    [("scale", 1.5, [3.0, 4.5]), ("offset", 0.25, [2.25, 3.25]), ("nan", None, [float("nan")] * 2)],
)
def test_value_faults_change_floating_outputs_exactly(use_profile, kind, value, expected):
    fault = {"op": "aten.add.Tensor", "kind": kind}
    if value is not None:
        fault["value"] = value
    use_profile({"faults": [fault]})
    a = torch.tensor([1.0, 2.0], device="sim")
    out = (a + 1).cpu()
    assert torch.equal(out, torch.tensor(expected)) or (kind == "nan" and out.isnan().all())
    ints = torch.tensor([1, 2], device="sim") + 1  # integer outputs are untouched
    assert torch.equal(ints.cpu(), torch.tensor([2, 3]))
    assert torch.equal((a * 2).cpu(), torch.tensor([2.0, 4.0]))  # other ops are untouched


def test_fault_on_inplace_and_view_ops(use_profile):
    use_profile({"faults": [{"op": "aten.add_.Tensor", "kind": "scale", "value": 2.0},
                            {"op": "aten.view.default", "kind": "offset", "value": 1.0}]})
    a = torch.ones(4, device="sim")
    a.add_(1)
    assert torch.equal(a.cpu(), torch.full((4,), 4.0))
    v = a.view(2, 2)
    assert torch.equal(v.cpu(), torch.full((2, 2), 5.0))
    assert torch.equal(a.cpu(), torch.full((4,), 4.0))  # the base is not corrupted by a view fault


def test_fault_dtype_filter(use_profile):
    use_profile({"faults": [{"op": "aten.mul.Tensor", "dtype": "bfloat16", "kind": "scale", "value": 2.0}]})
    f32 = torch.ones(2, device="sim")
    bf16 = torch.ones(2, device="sim", dtype=torch.bfloat16)
    assert torch.equal((f32 * 3).cpu(), torch.full((2,), 3.0))
    assert torch.equal((bf16 * 3).cpu(), torch.full((2,), 6.0, dtype=torch.bfloat16))


def test_a_fault_naming_an_integer_dtype_corrupts_those_integer_outputs(use_profile):
    # an int8 matmul's int32 accumulator: rounded to the nearest integer, saturated to the range
    use_profile({"faults": [{"op": "aten.mm.default", "dtype": "int32", "kind": "offset", "value": 1},
                            {"op": "aten.mul.Tensor", "dtype": "int8", "kind": "scale", "value": 1.5}]})
    a = torch.tensor([[1, 2], [3, 4]], dtype=torch.int32, device="sim")
    assert torch.equal((a @ a).cpu(), torch.tensor([[8, 11], [16, 23]], dtype=torch.int32))
    codes = torch.tensor([3, 100], dtype=torch.int8, device="sim")
    assert torch.equal((codes * 1).cpu(), torch.tensor([4, 127], dtype=torch.int8))  # 4.5 -> 4 (even), 150 -> 127
    # other integer dtypes, and float outputs of the same op, are left alone
    assert torch.equal((a.long() @ a.long()).cpu(), torch.tensor([[7, 10], [15, 22]]))
    assert torch.equal((a.float() @ a.float()).cpu(), torch.tensor([[7.0, 10.0], [15.0, 22.0]]))


def test_raise_fault(use_profile):
    use_profile({"faults": [{"op": "aten.tanh.default", "kind": "raise", "value": "tanh unit wedged"}]})
    with pytest.raises(RuntimeError, match="^tanh unit wedged$"):
        torch.ones(2, device="sim").tanh()


def test_delay_fault_is_slow_but_right(use_profile):
    use_profile({"faults": [{"op": "aten.tanh.default", "kind": "delay", "value": 0.2}]})
    started = time.perf_counter()
    out = torch.full((3,), 0.5, device="sim").tanh().cpu()
    assert time.perf_counter() - started >= 0.2
    assert torch.equal(out, torch.full((3,), 0.5).tanh())


def test_crash_fault_kills_with_sigsegv(sim_python):
    code = (
        "import conformance.sim as s, torch; s.register();"
        "s.set_profile(s.load_profile({'faults': [{'op': 'aten.atan2.default', 'kind': 'crash'}]}));"
        "x = torch.ones(2, device='sim'); print('ready', flush=True); torch.atan2(x, x); print('survived')"
    )
    p = sim_python(code)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == -signal.SIGSEGV
    assert "ready" in out and "survived" not in out


def test_hang_fault_never_returns(sim_python, tmp_path):
    prof = tmp_path / "hang.json"
    prof.write_text(json.dumps({"faults": [{"op": "aten.erfinv.default", "kind": "hang"}]}))
    code = (  # the profile comes through the environment, as workers get it
        "import conformance.sim as s, torch; s.register();"
        "x = torch.ones(2, device='sim') / 2; print('ready', flush=True); torch.erfinv(x); print('returned')"
    )
    p = sim_python(code, env={"NEURON_CHECK_SIM_PROFILE": str(prof)})
    assert p.stdout.readline().strip() == "ready"
    time.sleep(1.5)
    assert p.poll() is None  # still running: hung
    p.kill()
    p.wait(timeout=30)
