"""The native sim runtime: memory, pinned memory, serialization, generators, streams and events,
custom-op kernels, inference mode. Each behaves as it does on a real PrivateUse1 backend."""

from __future__ import annotations

import io

import pytest

torch = pytest.importorskip("torch")


def test_save_load_round_trip_of_tensors_and_state_dicts(sim_device):
    model = torch.nn.Linear(3, 2).to("sim")
    x = torch.randn(4, 3).to("sim")
    buffer = io.BytesIO()
    torch.save({"x": x, "view": x[1:, ::2], "state": model.state_dict()}, buffer)
    buffer.seek(0)
    back = torch.load(buffer)
    assert back["x"].device == back["state"]["weight"].device == torch.device("sim", 0)
    assert torch.equal(back["x"].cpu(), x.cpu()) and torch.equal(back["view"].cpu(), x[1:, ::2].cpu())
    buffer.seek(0)
    on_cpu = torch.load(buffer, map_location="cpu")
    assert on_cpu["x"].device.type == "cpu" and torch.equal(on_cpu["x"], x.cpu())
    fresh = torch.nn.Linear(3, 2).to("sim")
    fresh.load_state_dict(on_cpu["state"])
    assert torch.equal(fresh(x).cpu(), model(x).cpu())
    cpu_buffer = io.BytesIO()
    torch.save(torch.arange(5.0), cpu_buffer)
    cpu_buffer.seek(0)
    moved = torch.load(cpu_buffer, map_location="sim")
    assert moved.device.type == "sim" and moved.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_pin_memory_pins_host_memory(sim_device):
    pinned = torch.randn(8).pin_memory()
    assert pinned.is_pinned() and pinned.device.type == "cpu"
    assert not torch.randn(8).is_pinned()
    assert torch.empty(4, pin_memory=True).is_pinned()
    on_sim = pinned.to("sim", non_blocking=True)
    torch.accelerator.synchronize()
    assert torch.equal(on_sim.cpu(), pinned)


def test_dataloader_pins_its_batches(sim_device):
    data = torch.utils.data.TensorDataset(torch.randn(8, 3), torch.arange(8))
    loader = torch.utils.data.DataLoader(data, batch_size=4, pin_memory=True)
    batches = list(loader)
    assert len(batches) == 2
    assert all(x.is_pinned() and y.is_pinned() for x, y in batches)
    assert torch.equal(torch.cat([x for x, _ in batches]).to("sim").cpu(), data.tensors[0])


def test_memory_statistics_follow_allocations(sim_device):
    torch.accelerator.synchronize()
    base = torch.accelerator.memory_allocated()
    torch.accelerator.reset_peak_memory_stats()
    block = torch.empty(1 << 16, dtype=torch.uint8, device="sim")
    assert torch.accelerator.memory_allocated() == base + (1 << 16)
    assert torch.sim.memory_allocated() == torch.accelerator.memory_allocated()
    assert torch.accelerator.memory_reserved() >= torch.accelerator.memory_allocated()
    result = block.float() * 2  # an op's output is device memory too
    assert torch.accelerator.memory_allocated() >= base + 5 * (1 << 16)
    del block, result
    assert torch.accelerator.memory_allocated() == base
    assert torch.accelerator.max_memory_allocated() >= base + 5 * (1 << 16)
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == base
    stats = torch.accelerator.memory_stats()
    assert stats["allocated_bytes.all.current"] == base


def test_seeding_is_deterministic_and_per_generator(sim_device):
    def draws():
        return torch.cat([torch.randn(5, device="sim"), torch.rand(5, device="sim"),
                          torch.nn.functional.dropout(torch.ones(20, device="sim"), 0.5)]).cpu()

    torch.manual_seed(1234)
    first = draws()
    torch.manual_seed(1234)
    assert torch.equal(draws(), first)
    torch.manual_seed(4321)
    assert not torch.equal(draws(), first)
    own = torch.Generator("sim")
    assert own.device == torch.device("sim", 0)
    own.manual_seed(7)
    a = torch.randn(6, device="sim", generator=own)
    torch.randn(6, device="sim")  # the default generator does not disturb `own`
    own.manual_seed(7)
    assert torch.equal(torch.randn(6, device="sim", generator=own).cpu(), a.cpu())
    state = torch.sim.get_rng_state()
    x = torch.rand(3, device="sim")
    torch.sim.set_rng_state(state)
    assert torch.equal(torch.rand(3, device="sim").cpu(), x.cpu())


def test_streams_have_ids_and_follow_the_context(sim_device):
    default = torch.accelerator.current_stream()
    side = torch.Stream(device="sim")
    other = torch.sim.Stream()
    assert len({default.stream_id, side.stream_id, other.stream_id}) == 3
    assert default == torch.sim.default_stream()
    with torch.sim.stream(side):
        assert torch.accelerator.current_stream() == side
        with other:
            assert torch.accelerator.current_stream() == other
        y = torch.ones(3, device="sim") * 2
    assert torch.accelerator.current_stream() == default
    other.wait_stream(side)
    assert side.query() and torch.equal(y.cpu(), torch.full((3,), 2.0))


def test_events_record_wait_and_time_in_milliseconds(sim_device):
    import time

    side = torch.Stream(device="sim")
    start, end = torch.Event("sim", enable_timing=True), torch.Event("sim", enable_timing=True)
    start.record(side)
    time.sleep(0.01)
    end.record(side)
    torch.accelerator.current_stream().wait_event(end)
    end.synchronize()
    assert start.query() and end.query()
    assert 9.0 <= start.elapsed_time(end) < 1000.0
    untimed = torch.Event("sim")
    untimed.record()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):
        untimed.elapsed_time(end)


def test_event_timing_fault_makes_events_lie(use_profile):
    import time

    use_profile({"event_timing": {"scale": 10.0}})
    start, end = torch.Event("sim", enable_timing=True), torch.Event("sim", enable_timing=True)
    start.record()
    time.sleep(0.01)
    end.record()
    assert start.elapsed_time(end) >= 90.0


def test_a_sim_kernel_of_a_custom_op_is_dispatched_to(sim_device):
    @torch.library.custom_op("neuron_check_test::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @twice.register_kernel("sim")
    def _(x):
        return x * 3  # a different answer, so the test sees which kernel ran

    assert twice(torch.ones(2)).tolist() == [2.0, 2.0]
    assert twice(torch.ones(2, device="sim")).cpu().tolist() == [3.0, 3.0]


def test_inference_mode_forward_and_as_strided_backward(sim_device):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU()).to("sim")
    x = torch.randn(2, 4)
    with torch.inference_mode():
        y = model(x.to("sim"))
        assert y.is_inference() and y.device.type == "sim"
    assert torch.allclose(y.cpu(), model.cpu()(x), atol=1e-6)
    # Overlapping partial views of a base: the backward scatters through as_strided.
    for device in ("cpu", "sim"):
        base = torch.arange(10.0, device=device, requires_grad=True)
        base.as_strided((3, 3), (1, 2), 1).pow(2).sum().backward()
        grads = base.grad.cpu() if device == "sim" else base.grad
        if device == "cpu":
            expected = grads
    assert torch.equal(grads, expected)
