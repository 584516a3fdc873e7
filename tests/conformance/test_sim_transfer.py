"""The sim adapter's copies to and from the device (the native `_to_copy` / `copy_`): the same
tensors `.to` gives, and the profile's dtype refusals still apply to transfers."""

from __future__ import annotations

import pytest
import torch

from conformance.backends.builtin import SimAdapter

CASES = {
    "contiguous": lambda: torch.arange(6.0).reshape(2, 3),
    "transposed": lambda: torch.arange(6.0).reshape(2, 3).t(),
    "offset view": lambda: torch.arange(10.0)[3:7],
    "empty": lambda: torch.empty(0, 4),
    "bf16": lambda: torch.randn(3, 2).to(torch.bfloat16),
    "conjugate": lambda: torch.randn(3, dtype=torch.complex64).conj(),
    "negative bit": lambda: torch.randn(3, dtype=torch.complex64).conj().imag,
    "int": lambda: torch.tensor([1, 2, 3]),
}


@pytest.fixture
def adapter(sim_device):
    return SimAdapter().init()


def _same(a: torch.Tensor, b: torch.Tensor) -> None:
    assert (a.device, a.dtype, a.shape, a.stride(), a.is_conj(), a.is_neg()) == \
           (b.device, b.dtype, b.shape, b.stride(), b.is_conj(), b.is_neg())
    assert torch.equal(a.resolve_conj().resolve_neg().cpu(), b.resolve_conj().resolve_neg().cpu())


@pytest.mark.parametrize("case", CASES)
def test_copies_match_to(adapter, case):
    cpu = CASES[case]()
    on_sim = adapter.copy_to_device(cpu, "sim")
    _same(on_sim, cpu.to("sim", copy=True))
    back = adapter.copy_to_cpu(on_sim)
    _same(back, on_sim.to("cpu"))
    assert back.device.type == "cpu" and not back.requires_grad


def test_copies_are_independent(adapter):
    cpu = torch.zeros(4)
    on_sim = adapter.copy_to_device(cpu, "sim")
    on_sim.add_(1)  # an in-place op on the device must not reach the CPU original
    back = adapter.copy_to_cpu(on_sim)
    on_sim.add_(1)  # nor later device writes the copy brought back
    assert cpu.tolist() == [0.0] * 4 and back.tolist() == [1.0] * 4


def test_grad_tensor_comes_back_detached(adapter):
    on_sim = adapter.copy_to_device(torch.ones(2), "sim").requires_grad_(True)
    back = adapter.copy_to_cpu(on_sim * 2)
    assert back.tolist() == [2.0, 2.0] and not back.requires_grad


def test_profile_refusals_apply_to_transfers(adapter, use_profile):
    use_profile({"name": "no-bf16", "unsupported_dtypes": ["bfloat16"]})
    with pytest.raises(Exception, match="(?i)bfloat16|BFloat16"):
        adapter.copy_to_device(torch.ones(2, dtype=torch.bfloat16), "sim")
    assert adapter.copy_to_device(torch.ones(2), "sim").device.type == "sim"
