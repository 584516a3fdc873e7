"""The `sim` device behaves like a real PrivateUse1 backend (fault-free)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_register_is_idempotent_and_names_the_device(sim_device):
    sim_device.register()
    sim_device.register()
    assert sim_device.DEVICE == "sim"
    assert torch._C._get_privateuse1_backend_name() == "sim"
    assert torch.device("sim").type == "sim"


def test_accelerator_sees_sim(sim_device):
    assert torch.accelerator.current_accelerator() == torch.device("sim")
    assert torch.accelerator.is_available()
    assert torch.accelerator.device_count() == 1
    assert torch.accelerator.current_device_index() == 0
    torch.accelerator.synchronize()
    torch.accelerator.synchronize("sim:0")
    free, total = torch.accelerator.get_memory_info()
    assert 0 < free <= total
    torch.accelerator.reset_peak_memory_stats()
    torch.accelerator.empty_cache()
    with pytest.raises(ValueError, match="doesn't match the current accelerator"):
        torch.accelerator.synchronize("cpu")  # torch's own check, untouched


def test_device_module(sim_device):
    mod = torch.sim
    assert mod.is_available() and mod.device_count() == 1 and mod.current_device() == 0
    mod.set_device(0)
    mod.synchronize()
    mod.empty_cache()
    assert mod.memory_allocated() == torch.accelerator.memory_allocated()
    with pytest.raises(RuntimeError):
        mod.set_device(1)


def test_factories_and_transfers(sim_device):
    for t in (torch.zeros(2, 3, device="sim"), torch.ones(4, device="sim"),
              torch.empty(5, device="sim"), torch.arange(6, device="sim"),
              torch.full((2,), 3.0, device="sim"), torch.randn(3, device="sim"),
              torch.tensor([1.0, 2.0], device="sim")):
        assert t.device == torch.device("sim", 0)
        assert t.is_sim
    assert torch.equal(torch.arange(6, device="sim").cpu(), torch.arange(6))
    x = torch.randn(3, 4)
    s = x.to("sim")
    assert s.device.type == "sim" and s.shape == x.shape and s.dtype == x.dtype
    back = s.to("cpu")
    assert type(back) is torch.Tensor and torch.equal(back, x)
    assert torch.equal(x.sim().cpu(), x)
    assert torch.equal(s.to(torch.float64).cpu(), x.double())
    assert "device='sim:0'" in repr(s)
    assert s.sum().item() == pytest.approx(x.sum().item(), rel=1e-5)
    assert s.tolist() == x.tolist()
    with pytest.raises(TypeError, match="Use Tensor.cpu"):
        s.numpy()


def test_views_and_inplace_alias_the_base(sim_device):
    base = torch.zeros(3, 4, device="sim")
    row = base[1]
    row.add_(2)
    col = base.t()[2]
    col.fill_(5)
    expected = torch.zeros(3, 4)
    expected[1] += 2
    expected[:, 2] = 5
    assert torch.equal(base.cpu(), expected)
    flat = base.view(-1)
    flat[0] = 7
    assert base[0, 0].item() == 7
    assert row._base is base


def test_out_and_resizing_inplace_ops_update_metadata(sim_device):
    out = torch.empty(0, device="sim")
    torch.add(torch.ones(3, device="sim"), 1, out=out)
    assert out.shape == (3,) and torch.equal(out.cpu(), torch.full((3,), 2.0))
    t = torch.ones(2, 3, device="sim")
    t.t_()
    assert t.shape == (3, 2) and t.stride() == (1, 3)
    t.resize_(7)
    assert t.shape == (7,)


def test_mixed_devices_raise_like_a_real_backend(sim_device):
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3, device="sim") + torch.ones(3)
    # 0-dim CPU tensors are scalars, and index tensors may stay on the CPU.
    assert torch.equal((torch.ones(3, device="sim") + torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))
    x = torch.arange(5.0, device="sim")
    assert torch.equal(x[torch.tensor([0, 2])].cpu(), torch.tensor([0.0, 2.0]))
    assert torch.equal(x[[1, 3]].cpu(), torch.tensor([1.0, 3.0]))


def test_conj_bits_are_honoured(sim_device):
    z = torch.randn(5, 6, 7)
    assert torch.allclose(torch.fft.hfftn(z.to("sim")).cpu(), torch.fft.hfftn(z))
    c = torch.randn(3, dtype=torch.complex64)
    assert torch.equal((c.to("sim").conj() * 2).cpu(), c.conj() * 2)


def test_autograd(sim_device):
    w = torch.randn(3, device="sim", requires_grad=True)
    (w * w).sum().backward()
    assert w.grad.device.type == "sim"
    assert torch.allclose(w.grad.cpu(), 2 * w.detach().cpu())


def test_module_to_sim_trains(sim_device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    ref.load_state_dict(model.state_dict())
    model.to("sim")
    assert all(p.device.type == "sim" and isinstance(p, torch.nn.Parameter) for p in model.parameters())
    x = torch.randn(5, 4)
    for m, inp in ((model, x.to("sim")), (ref, x)):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        m(inp).pow(2).sum().backward()
        opt.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert p.grad.device.type == "sim"
        assert torch.allclose(p.detach().cpu(), q.detach(), atol=1e-6)


def test_manual_seed_reproduces_random_ops(sim_device):
    torch.manual_seed(0)
    a = torch.randn(3, device="sim")
    torch.manual_seed(0)
    b = torch.randn(3, device="sim")
    torch.manual_seed(0)
    c = torch.randn(3)
    assert torch.equal(a.cpu(), b.cpu()) and torch.equal(a.cpu(), c)
    torch.sim.manual_seed(5)
    d = torch.rand(4, device="sim")
    torch.sim.manual_seed(5)
    assert torch.equal(d.cpu(), torch.rand(4, device="sim").cpu())
    assert torch.sim.initial_seed() == 5


def test_rng_state_round_trip_and_independent_of_cpu(sim_device):
    state = torch.sim.get_rng_state()
    assert state.dtype == torch.uint8
    x = torch.rand(4, device="sim")
    drop = torch.nn.functional.dropout(torch.ones(50, device="sim"), 0.5)
    torch.rand(3)  # the CPU generator does not disturb the sim stream
    torch.sim.set_rng_state(state)
    assert torch.equal(x.cpu(), torch.rand(4, device="sim").cpu())
    assert torch.equal(drop.cpu(), torch.nn.functional.dropout(torch.ones(50, device="sim"), 0.5).cpu())
    with torch.random.fork_rng(device_type="sim"):
        torch.rand(2, device="sim")


@pytest.fixture
def structured_trace_on():
    """Attach a handler to torch's structured-trace log, as TORCH_TRACE or pytest>=9's log
    capture do: every trace payload (reprs of traced tensors included) is then computed."""
    import logging

    from torch._logging._internal import trace_log

    handler = logging.NullHandler()
    trace_log.addHandler(handler)
    yield
    trace_log.removeHandler(handler)


def _compile_counters(fn, *args, **compile_kwargs):
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    out = torch.compile(fn, backend="aot_eager", **compile_kwargs)(*args)
    return out, dict(counters["graph_break"]), dict(counters["frames"])


def test_compile_aot_eager(sim_device, structured_trace_on):
    def f(t):
        return (t.sin() * 2 + t.cos()).sum(dim=0)

    x = torch.randn(4, 3)
    out, breaks, frames = _compile_counters(f, x.to("sim"))
    assert out.device.type == "sim"
    assert torch.allclose(out.cpu(), f(x), atol=1e-6)
    assert breaks == {}
    assert frames == {"total": 1, "ok": 1}  # dynamo compiled f, and nothing of sim's own
    out, _, _ = _compile_counters(f, x.to("sim"), fullgraph=True)
    assert torch.allclose(out.cpu(), f(x), atol=1e-6)


def test_compile_never_traces_sim_machinery(sim_device, structured_trace_on):
    # A graph break in user code runs the rest eagerly: dynamo then sees every Python frame
    # the dispatcher calls, and must leave sim's kernels alone, as it does a real backend's.
    def f(t):
        y = t.exp()
        n = int(y.sum().item())  # data-dependent: one graph break here
        return y.nonzero().float().sum() + n

    x = torch.randn(5, 3)
    out, breaks, _ = _compile_counters(f, x.to("sim"))
    assert out.device.type == "sim"
    assert torch.allclose(out.cpu(), f(x))
    assert sum(breaks.values()) >= 1
    assert not [reason for reason in breaks if "sim" in reason.lower()]


def test_a_sim_tensor_is_a_plain_tensor(sim_device):
    t = torch.empty(1, device="sim")
    assert type(t) is torch.Tensor
    assert type(torch.randn(2).to("sim") * 2) is torch.Tensor
    assert type(torch.nn.Parameter(t)) is torch.nn.Parameter


def test_autocast(sim_device):
    model = torch.nn.Linear(4, 3).to("sim")
    x = torch.randn(2, 4, device="sim")
    with torch.autocast("sim", dtype=torch.bfloat16):
        y = model(x)
        z = x.exp()
    assert y.dtype == torch.bfloat16 and z.dtype == torch.float32
    y.float().sum().backward()
    assert model.weight.grad.dtype == torch.float32 and model.weight.grad.device.type == "sim"
    assert model(x).dtype == torch.float32


def test_autocast_casts_attention_inputs_like_cuda(sim_device):
    # Transformers' sdpa path feeds float32 q/k (after rotary) and a bf16 v (from a linear).
    q = torch.randn(1, 2, 4, 8, device="sim")
    v = torch.randn(1, 2, 4, 8, device="sim").bfloat16()
    with torch.autocast("sim", dtype=torch.bfloat16):
        out = torch.nn.functional.scaled_dot_product_attention(q, q, v)
    assert out.dtype == torch.bfloat16 and out.device.type == "sim"


def test_histc_takes_integers_like_accelerator_kernels(sim_device):
    counts = torch.histc(torch.tensor([0, 1, 1, 3, 3, 3], dtype=torch.int32, device="sim"), bins=4, min=0, max=3)
    assert counts.dtype == torch.int32 and counts.device.type == "sim"
    assert counts.cpu().tolist() == [1, 2, 0, 3]


def test_zero_gradients_are_zero_tensors_that_read_as_zeros(sim_device):
    # Autograd returns a ZeroTensor (no memory) for a gradient known to be zero: sgn of a real
    # tensor. Reading it on sim, or bringing it to the CPU, crashed the worker with SIGSEGV.
    x = torch.randn(4, 3, device="sim", requires_grad=True)
    torch.sgn(x).sum().backward()
    assert x.grad._is_zerotensor() and x.grad.device == x.device
    assert torch.equal(x.grad.to("cpu"), torch.zeros(4, 3))
    assert torch.equal((x.grad + 2).cpu(), torch.full((4, 3), 2.0))
    assert torch.equal(x.grad.clone().cpu(), torch.zeros(4, 3))
    assert not x.grad.clone()._is_zerotensor()


def test_module_to_sim_keeps_tied_weights_tied(sim_device):
    # Module.to() keeps a parameter object only if the CPU and device tensors are shallow-copy
    # compatible; PyTorch counts in-tree backends only, so without sim's own answer an LM head
    # tied to its embeddings came apart on the device and its gradient showed up twice.
    model = torch.nn.Module()
    model.embed, model.head = torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5, bias=False)
    model.head.weight = model.embed.weight
    weight = model.embed.weight
    model.to(device="sim", dtype=torch.bfloat16)
    assert model.head.weight is model.embed.weight is weight
    assert weight.device.type == "sim" and weight.dtype == torch.bfloat16
    assert [name for name, _ in model.named_parameters()] == ["embed.weight"]
    assert torch._has_compatible_shallow_copy_type(torch.ones(1, device="sim"), torch.ones(1))
    assert not torch._has_compatible_shallow_copy_type(torch.ones(1, device="sim"), torch.ones(1).to_sparse())


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_antialiased_resizing_runs_in_half_precision_as_on_an_accelerator(sim_device, use_profile, mode, dtype):
    # The CPU has no bfloat16/float16 antialiased kernels (models upcast for the CPU only);
    # an accelerator has them, computing in float32, and so does sim, faults applying as to any op.
    import torch.nn.functional as F

    # Inputs already rounded to the dtype, so the float32 reference sees what the device sees.
    x, size = torch.randn(1, 2, 9, 8).to(dtype).float(), (4, 5)
    grad = torch.randn(1, 2, *size).to(dtype).float()
    on_sim = x.to("sim", dtype).requires_grad_()
    out = F.interpolate(on_sim, size=size, mode=mode, antialias=True)
    out.backward(grad.to("sim", dtype))
    wide = x.clone().requires_grad_()
    expected = F.interpolate(wide, size=size, mode=mode, antialias=True)
    expected.backward(grad)
    assert out.dtype == on_sim.grad.dtype == dtype
    torch.testing.assert_close(out.cpu(), expected.to(dtype))
    torch.testing.assert_close(on_sim.grad.cpu(), wide.grad.to(dtype))

    use_profile({"faults": [{"op": f"aten._upsample_{mode}2d_aa.default", "kind": "scale", "value": 1.5}]})
    faulty = F.interpolate(x.to("sim", dtype), size=size, mode=mode, antialias=True)
    torch.testing.assert_close(faulty.cpu(), (expected * 1.5).to(dtype), rtol=2e-2, atol=2e-2)
