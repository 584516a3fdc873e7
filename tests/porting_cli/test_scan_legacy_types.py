"""Legacy CUDA tensor types and the default-device APIs as the installed torch has them (issue 45,
item 3): the facts the findings state are measured here, the fixes run on sim."""

from __future__ import annotations

import warnings

import pytest
import torch

from porting_cli.analysis.fix import fix_source
from porting_cli.analysis.scan import scan_source

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="measures the CUDA types where CUDA is absent")


@pytest.fixture
def sim_device():
    from conformance import sim

    sim.register()
    yield "sim"
    torch.set_default_device(None)
    torch.set_default_dtype(torch.float32)


def found(source: str) -> list[tuple[int, str, bool]]:
    return [(f.line, f.rule_id, f.fixable) for f in scan_source(source).findings]


def message(source: str, rule: str) -> str:
    return next(f.message for f in scan_source(source).findings if f.rule_id == rule)


# -- the facts, measured ---------------------------------------------------------------------------
@no_cuda
def test_the_installed_torch_refuses_the_cuda_types_without_cuda():
    with pytest.raises(TypeError, match="torch.cuda.FloatTensor not available"):
        torch.cuda.FloatTensor(2)
    with pytest.raises(RuntimeError):
        torch.ones(2).type(torch.cuda.HalfTensor)
    with warnings.catch_warnings(record=True) as said, pytest.raises(TypeError):
        warnings.simplefilter("always")
        torch.set_default_tensor_type(torch.cuda.FloatTensor)
    assert any("deprecated as of PyTorch 2.1" in str(w.message) for w in said)


@no_cuda
def test_a_sim_tensor_is_no_cuda_type(sim_device):
    x = torch.ones(2, device="sim")
    assert x.type().endswith(".FloatTensor") and "cuda" not in x.type()
    assert not isinstance(x, torch.cuda.FloatTensor)


# -- NC112: the default tensor type ---------------------------------------------------------------
@pytest.mark.parametrize("argument, dtype", [("torch.cuda.FloatTensor", "torch.float32"),
                                             ("'torch.cuda.HalfTensor'", "torch.float16"),
                                             ("torch.cuda.BFloat16Tensor", "torch.bfloat16")])
def test_a_cuda_default_tensor_type_is_fixed_to_a_default_dtype_and_device(argument, dtype):
    source = f"import torch\nif torch.cuda.is_available():\n    torch.set_default_tensor_type({argument})\n"
    assert (3, "NC112", True) in found(source) and not any(r == "NC105" for _, r, _ in found(source))
    fixed = fix_source(source).new_text
    assert f"    torch.set_default_dtype({dtype})\n    torch.set_default_device(DEVICE)\n" in fixed
    assert "set_default_tensor_type" not in fixed and "deprecated since torch 2.1" in message(source, "NC112")


def test_the_fixed_default_makes_new_tensors_on_sim_in_the_dtype(sim_device):
    fixed = fix_source("import torch\ntorch.set_default_tensor_type(torch.cuda.FloatTensor)\n").new_text
    body = "\n".join(line for line in fixed.splitlines() if line.startswith("torch.set_default"))
    exec(body, {"torch": torch, "DEVICE": torch.device("sim")})
    made = torch.ones(1)
    assert made.device.type == "sim" and made.dtype == torch.float32


def test_the_legacy_constructor_ignores_the_default_device():
    torch.set_default_device("meta")
    try:
        assert torch.Tensor(2).device.type == "cpu" and torch.ones(2).device.type == "meta"
    finally:
        torch.set_default_device(None)


@pytest.mark.parametrize("source", [
    "import torch\ntorch.set_default_tensor_type(torch.cuda.LongTensor)\n",  # not a type it takes
    # torch.Tensor(...) followed the CUDA default type; it would not follow a default device
    "import torch\ntorch.set_default_tensor_type(torch.cuda.FloatTensor)\nbuf = torch.Tensor(4)\n",
    "import torch\nok = torch.set_default_tensor_type(torch.cuda.FloatTensor) or True\n",  # inside an expression
])
def test_a_default_tensor_type_the_fix_cannot_rewrite_stays_reported(source):
    assert [(r, fix) for _, r, fix in found(source)] == [("NC112", False)]


@pytest.mark.parametrize("source", [
    "import torch\ntorch.set_default_tensor_type(torch.DoubleTensor)\n",
    "import torch\ntorch.set_default_dtype(torch.float32)\n",
    "import torch\ntorch.set_default_device('cpu')\n",
    "import torch\nwith torch.device('meta'):\n    m = torch.nn.Linear(2, 2)\n",
    "import torch\ny = x.type(torch.float16)\nok = isinstance(x, torch.Tensor)\nname = x.type()\n",
])
def test_device_agnostic_defaults_and_type_calls_are_no_finding(source):
    assert found(source) == []


@pytest.mark.parametrize("source, fixed_line", [
    ("import torch\ntorch.set_default_device('cuda')\n", "torch.set_default_device(DEVICE)"),
    ("import torch\nwith torch.device('cuda'):\n    m = torch.nn.Linear(2, 2)\n", "with DEVICE:"),
])
def test_a_cuda_default_device_is_the_current_accelerator(source, fixed_line):
    assert [(r, fix) for _, r, fix in found(source)] == [("NC102", True)]
    assert fixed_line in fix_source(source).new_text.splitlines()


# -- NC105: the legacy types, by how they are used -------------------------------------------------
@pytest.mark.parametrize("source, says", [
    ("import torch\nb = torch.cuda.FloatTensor(4)\n", "the constructor raises `TypeError` without CUDA"),
    ("import torch\nb = torch.cuda.FloatTensor(4)\n", "dtype=torch.float32, device=device"),
    ("import torch\ny = x.type(torch.cuda.HalfTensor)\n", "moves the tensor to CUDA and raises without CUDA"),
    ("import torch\ny = x.type(torch.cuda.HalfTensor)\n", "`.to(device, torch.float16)`"),
    ("import torch\ny = x.type('torch.cuda.LongTensor')\n", "`.to(device, torch.int64)`"),
    ("import torch\nok = isinstance(x, (torch.FloatTensor, torch.cuda.FloatTensor))\n",
     "is False for a tensor on any other accelerator (its `x.type()` is the backend's `FloatTensor`"),
])
def test_a_legacy_type_says_what_the_installed_torch_does_where_it_is_used(source, says):
    assert [(r, fix) for _, r, fix in found(source)] == [("NC105", False)]
    assert says in message(source, "NC105") and "installed torch 2.13" in message(source, "NC105")


def test_a_legacy_type_only_named_keeps_the_plain_message():
    assert message("import torch\nT = torch.cuda.LongTensor\n", "NC105").startswith("legacy `torch.cuda.*Tensor`")
