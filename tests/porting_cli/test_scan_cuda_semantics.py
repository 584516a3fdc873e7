"""`torch.cuda` calls as the installed torch has them without CUDA (issue 45, item 3): each fact the
findings state is measured here on the installed torch, and the fixes are run on sim."""

from __future__ import annotations

import pytest
import torch

from porting_cli.analysis.fix import fix_source
from porting_cli.analysis.scan import scan_source, torch_semantics
from porting_cli.analysis.scan.torch_semantics import LAZY, NO_OP, RAISES, WITHOUT_CUDA, TorchSemantics

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="measures torch.cuda where CUDA is absent")

#: arguments each measured torch.cuda function is called with
ARGUMENTS = {"manual_seed": (1,), "manual_seed_all": (1,), "set_device": (0,),
             "set_rng_state": (torch.get_rng_state(),), "set_rng_state_all": ([torch.get_rng_state()],)}


def _measured(name: str) -> str:
    """What torch.cuda.<name> does here, in WITHOUT_CUDA's words."""
    tracker = torch.cuda._lazy_seed_tracker
    before = (len(torch.cuda._queued_calls), tracker.manual_seed_cb, tracker.manual_seed_all_cb)
    try:
        value = getattr(torch.cuda, name)(*ARGUMENTS.get(name, ()))
    except (AssertionError, AttributeError, RuntimeError):
        return RAISES
    after = (len(torch.cuda._queued_calls), tracker.manual_seed_cb, tracker.manual_seed_all_cb)
    if value is None and after != before and not torch.cuda.is_initialized():
        return LAZY
    if value is None:
        return NO_OP
    return f"returns {value!r}".replace("OrderedDict()", "{}")


@no_cuda
@pytest.mark.parametrize("name", sorted(WITHOUT_CUDA))
def test_each_stated_fact_is_what_the_installed_torch_does_without_cuda(name):
    assert _measured(name) == WITHOUT_CUDA[name]


def test_a_lazy_seed_says_it_never_reaches_the_accelerator_and_is_fixed_to_the_device_module():
    source = "import torch\ntorch.cuda.manual_seed_all(0)\n"
    (finding,) = scan_source(source).findings
    assert finding.rule_id == "NC208" and finding.fixable
    assert "torch.cuda.manual_seed_all` is lazy" in finding.message and "installed torch 2.13" in finding.message
    assert "torch.get_device_module(DEVICE).manual_seed_all(0)" in fix_source(source).new_text


def test_seed_all_is_reported_but_not_fixed_where_device_modules_may_lack_it():
    (finding,) = scan_source("import torch\ntorch.cuda.seed_all()\n").findings
    assert finding.rule_id == "NC208" and not finding.fixable and "is lazy" in finding.message


@pytest.mark.parametrize("source, rule, says", [
    ("import torch\ntorch.cuda.empty_cache()\n", "NC206", "is a no-op without CUDA"),
    ("import torch\ntorch.cuda.synchronize()\n", "NC205", "raises without CUDA"),
    ("import torch\nm = torch.cuda.memory_allocated()\n", "NC207", "returns 0 without CUDA"),
    ("import torch\ns = torch.cuda.get_rng_state()\n", "NC299", "raises without CUDA"),
    ("import torch\ntorch.cuda.set_rng_state(s)\n", "NC299", "is lazy"),
])
def test_each_cuda_call_says_what_it_does_without_cuda(source, rule, says):
    (finding,) = scan_source(source).findings
    assert finding.rule_id == rule and says in finding.message


def test_a_no_op_empty_cache_is_a_warning_not_an_error():
    (finding,) = scan_source("import torch\ntorch.cuda.empty_cache()\n").findings
    assert finding.severity == "warning"


@pytest.mark.parametrize("source", ["import torch\ntorch.manual_seed(0)\n",
                                    "import torch\ntorch.accelerator.empty_cache()\n",
                                    "import torch\ng = torch.Generator().manual_seed(0)\n"])
def test_device_agnostic_seeding_and_cache_calls_are_no_finding(source):
    assert scan_source(source).findings == []


def test_the_accelerator_names_are_those_of_the_installed_torch():
    names = torch_semantics.installed().accelerator_names
    assert names == frozenset(torch.accelerator.__all__)
    assert "empty_cache" in names and "manual_seed" not in names


def test_a_fix_that_needs_an_accelerator_function_the_installed_torch_lacks_is_withdrawn(monkeypatch):
    older = TorchSemantics((2, 7), frozenset({"is_available", "current_accelerator", "synchronize"}))
    monkeypatch.setattr(torch_semantics, "installed", lambda: older)
    source = "import torch\ntorch.cuda.empty_cache()\ntorch.cuda.synchronize()\n"
    empty, sync = scan_source(source).findings
    assert not empty.fixable and "has no `torch.accelerator.empty_cache`" in empty.message
    assert "torch 2.13 (measured there)" in empty.message
    assert sync.fixable
    fixed = fix_source(source).new_text
    assert "torch.cuda.empty_cache()" in fixed and "torch.accelerator.synchronize()" in fixed


@pytest.fixture
def sim_device():
    from conformance import sim

    sim.register()
    return "sim"


def _draws(seed_code: str) -> list[list[float]]:
    out = []
    for _ in range(2):
        exec(seed_code, {"torch": torch, "DEVICE": torch.device("sim")})
        out.append(torch.rand(4, device="sim").tolist())
    return out


@no_cuda
def test_on_sim_the_cuda_seed_does_not_reach_the_device_and_the_fixed_seed_does(sim_device):
    first, second = _draws("torch.cuda.manual_seed_all(7)")
    assert first != second  # the seed was queued for CUDA: sim's generator ran on
    fixed = fix_source("import torch\ntorch.cuda.manual_seed_all(7)\n").new_text
    seed_line = fixed.splitlines()[-1].strip()
    first, second = _draws(seed_line)
    assert seed_line == "torch.get_device_module(DEVICE).manual_seed_all(7)" and first == second
