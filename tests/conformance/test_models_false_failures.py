"""False failures of a correct backend in the models suite, one idiom each (issue 29): state that
`Module.to()` does not reach, state a harness trial leaves behind, random draws in a replay."""

from __future__ import annotations

import pytest
import torch

from conformance.models import judges, passes
from op_db.records import Status, WorkItem


class PlainListLayers(torch.nn.Module):
    """OneFormer's idiom: layers kept in a Python list, which `Module.to()` never sees."""

    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(4, 4)
        self.projections = [torch.nn.Linear(4, 4) for _ in range(2)]
        self.offset = torch.tensor(0.5)  # a 0-dim CPU tensor mixes with any device: not stray

    def forward(self, x):
        return self.projections[1](self.projections[0](self.inner(x))) + self.offset


class CachesOnFirstCall(torch.nn.Module):
    """Mimi's idiom: a tensor derived on first use and cached in a plain attribute."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Buffer(torch.randn(3, 4))
        self._cached = None

    def forward(self, x):
        if self._cached is None:
            self._cached = self.table * 2
        return torch.cdist(x, self._cached)


@pytest.fixture(scope="module")
def models_ctx():
    """A models-suite worker context on sim, without the zoo catalogue (these tests need none)."""
    from conformance import backends
    from conformance.engine.config import RunConfig, WorkerContext

    adapter, device = backends.resolve("sim")
    adapter.init()
    return WorkerContext(RunConfig(backend="sim", device=device), adapter)


def _device_run(models_ctx, base, dtype=torch.float32):
    from conformance.models import runner

    item = WorkItem("model", "toy", "forward", str(dtype).removeprefix("torch."), "eager")
    return runner._DeviceRun(models_ctx, item, passes.run_forward, base, {"x": torch.randn(2, 4)}, dtype, 0)


def test_layers_in_a_plain_list_are_a_model_bug_not_a_device_error(models_ctx):
    from conformance.models.stray_state import stray_state

    torch.manual_seed(0)
    device_run = _device_run(models_ctx, PlainListLayers())
    failure = device_run.execute()
    assert failure is not None and "same device" in str(failure)
    reason = device_run.model_bug(failure)
    assert reason.startswith("model bug, not the backend's: Module.to() does not move or cast projections[0], "
                             "projections[1] (module in a plain list, not an nn.ModuleList/ModuleDict)")
    assert "(on CUDA too)" in reason
    assert stray_state(PlainListLayers().to(torch.bfloat16), "cpu", torch.bfloat16) == [
        "projections[0], projections[1] (module in a plain list, not an nn.ModuleList/ModuleDict)"]


def test_layers_in_a_plain_list_break_the_cpu_reference_in_bf16_as_a_model_bug():
    from conformance.models.stray_state import model_bug

    model = PlainListLayers().to(torch.bfloat16)
    with pytest.raises(RuntimeError) as raised:
        model(torch.randn(2, 4, dtype=torch.bfloat16))
    reason = model_bug(model, "cpu", torch.bfloat16, raised.value)
    assert reason.startswith("model bug, not the backend's: Module.to() does not move or cast projections[0]")
    assert model_bug(model, "cpu", torch.bfloat16, RuntimeError("index 7 is out of bounds")) is None


def test_a_device_error_without_stray_state_stays_the_devices(models_ctx):
    torch.manual_seed(0)
    healthy = PlainListLayers()
    healthy.projections = torch.nn.ModuleList(healthy.projections)
    device_run = _device_run(models_ctx, healthy)
    assert device_run.execute() is None
    assert device_run.model_bug(RuntimeError("Expected all tensors to be on the same device")) is None


def test_a_cache_filled_on_the_cpu_travels_with_a_copy_as_a_model_bug(models_ctx):
    import copy

    torch.manual_seed(0)
    base = CachesOnFirstCall()
    fresh = copy.deepcopy(base)
    base(torch.randn(2, 4))  # filled on the CPU: every copy carries it, `.to()` leaves it there
    stale = _device_run(models_ctx, base)
    failure = stale.execute()
    assert failure is not None
    assert "_cached (tensor in a plain attribute, not a buffer)" in stale.model_bug(failure)
    assert _device_run(models_ctx, fresh).execute() is None  # filled on the device: a user's model runs


def test_inputs_are_found_on_a_copy_so_the_model_stays_fresh(models_ctx, monkeypatch):
    """Input layouts are found by running the model; what that run caches must not reach the
    model the references and the device are copied from."""
    from types import SimpleNamespace

    from conformance.models import inputs as model_inputs
    from conformance.models import runner, zoo
    from conformance.models.plan import ModelOptions

    def probing(task, config, seed, *, labels=False, model=None):
        model(torch.randn(2, 4))  # a trial forward, as patches.accepted runs one
        return {"x": torch.randn(2, 4)}

    entry = zoo.ZooEntry("toy", "base", "CachesOnFirstCall", "ToyConfig")
    built = CachesOnFirstCall()
    built.config = SimpleNamespace()
    monkeypatch.setattr(zoo, "pairs", lambda: {"toy": entry})
    monkeypatch.setattr(zoo, "build_model", lambda entry, attn, seed: built)
    monkeypatch.setattr(zoo, "class_exists", lambda entry: True)
    monkeypatch.setattr(model_inputs, "make_inputs", probing)
    base, inputs, _, _ = runner._transformers_item(WorkItem("model", "toy", "forward", "float32", "eager"),
                                                    ModelOptions(), 0)
    assert base is built and base._cached is None and set(inputs) == {"x"}


@pytest.mark.parametrize("draws_from_cpu", [True, False])
def test_a_replay_takes_random_draws_made_on_the_cpu(models_ctx, draws_from_cpu):
    """VibeVoice's idiom: noise drawn inside the forward. The models suite draws it on the CPU
    (RandomOnCpu), so its replay may take the device's numbers; elsewhere the replay gives up."""
    from conformance.models.randomness import RandomOnCpu
    from conformance.reference.oprecord import OpRecorder
    from conformance.reference.replay import replay

    device = models_ctx.device
    weight = torch.randn(4, device=device)
    with RandomOnCpu("sim"), OpRecorder("sim", keep_calls="references") as recorder:
        noise = torch.randn(4, device=device)
        out = (noise * weight).sum()
    assert "aten.randn.default" in recorder.ops
    replayed = replay(recorder.calls, out, "sim", draws_from_cpu=draws_from_cpu)
    if draws_from_cpu:
        assert torch.equal(replayed, (noise.cpu() * weight.cpu()).sum())
    else:
        assert replayed is None


def test_a_replay_reads_a_draw_as_it_was_made_whatever_is_written_to_it_later(models_ctx):
    from conformance.models.randomness import RandomOnCpu
    from conformance.reference.oprecord import OpRecorder
    from conformance.reference.replay import replay

    with RandomOnCpu("sim"), OpRecorder("sim", keep_calls="references") as recorder:
        noise = torch.randn(4, device=models_ctx.device)
        first = noise * 2
        noise.add_(1)  # through an alias (the user's tensor is a detach of the draw)
    assert torch.equal(replay(recorder.calls, first, "sim", draws_from_cpu=True), first.cpu())


class NoisySiLU(torch.nn.Module):
    """Noise drawn in the forward before a SiLU (a diffusion head's idiom)."""

    def __init__(self):
        super().__init__()
        self.first, self.last = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)

    def forward(self, input):
        hidden = self.first(input)
        return self.last(torch.nn.functional.silu(hidden + torch.randn(hidden.shape, device=hidden.device, dtype=hidden.dtype)))


SIGMOID_FAULT = {"name": "sigmoid-scale",
                 "faults": [{"op": "aten.sigmoid.default", "dtype": "bfloat16", "kind": "scale", "value": 1.01}]}


def _noisy_backward(models_ctx):
    from conformance.models import runner

    torch.manual_seed(0)
    base, inputs = NoisySiLU(), {"input": torch.randn(8, 16)}
    item = WorkItem("model", "toy", "backward", "bfloat16", "eager")
    ref = runner._on_cpu(passes.run_backward, runner._copy(base, "cpu", torch.bfloat16), inputs, torch.bfloat16, 0)
    hi = runner._on_cpu(passes.run_backward, runner._copy(base, "cpu", torch.float64), inputs, torch.float64, 0)
    device_run = runner._DeviceRun(models_ctx, item, passes.run_backward, base, inputs, torch.bfloat16, 0)
    assert device_run.execute() is None and device_run.random_ops == {"aten.randn.default": 1}
    return device_run, ref, hi


def test_a_model_that_draws_noise_gets_its_second_reference_and_a_fault_still_fails(models_ctx, use_profile):
    from conformance.models import runner
    from conformance.models.composite import against_composite
    from conformance.numerics import Comparison

    failed = Comparison(False, "rmse", "as if the CPU's fused kernel had set the bound")
    passed = against_composite(*_noisy_backward(models_ctx), failed, judges.judge_grads)
    assert passed.ok and passed.rule != "rmse", passed.reason
    use_profile(SIGMOID_FAULT)
    caught = against_composite(*_noisy_backward(models_ctx), failed, judges.judge_grads)
    assert not caught.ok and "primitive aten.sigmoid.default of the device's op sequence fails" in caught.reason


@pytest.mark.parametrize("model_type", ["kimi_linear", "qwen3_next"])
def test_linear_attention_heads_shrink_like_the_attentions(model_type):
    """A tiny config keeps every kept intermediate small, so rule 6 can keep a backward to replay
    (64 KDA heads of 128 kept GLM-5-Next's at 13 GB); both namings of linear-attention heads."""
    from conformance.models import zoo

    values = zoo.build_config(zoo.pairs()[model_type]).to_dict()
    linear = {k: v for k, v in values.items() if k.startswith("linear_") and ("head" in k)}
    assert linear and all(v <= (8 if k.endswith("head_dim") else 4) for k, v in linear.items()), linear
