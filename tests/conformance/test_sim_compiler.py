"""The `sim` torch.compile backend: aten graphs through AOTAutograd, run on sim kernels."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture
def sim_compile(sim_device):
    from conformance.sim import compiler

    compiler.register_compile_backend()
    torch._dynamo.reset()
    yield compiler
    torch._dynamo.reset()


def _f(t):
    return (t.sin() * 2 + t.cos()).sum(dim=0)


def test_compiled_graph_matches_eager_and_shows_its_aten_ops(sim_compile):
    x = torch.randn(4, 3)
    seen = []
    with sim_compile.observe_graphs(lambda gm: seen.append(sim_compile.graph_ops(gm))):
        out = torch.compile(_f, backend="sim", fullgraph=True)(x.to("sim"))
    assert out.device.type == "sim"
    assert torch.allclose(out.cpu(), _f(x), atol=1e-6)
    assert seen == [["aten.sin.default", "aten.mul.Tensor", "aten.cos.default",
                     "aten.add.Tensor", "aten.sum.dim_IntList"]]


def test_compiled_graph_runs_on_sim_kernels_so_the_profile_applies(sim_compile, use_profile):
    use_profile({"faults": [{"op": "aten.sin.default", "kind": "scale", "value": 2.0}]})
    x = torch.randn(4, 3)
    out = torch.compile(_f, backend="sim")(x.to("sim"))
    expected = (x.sin() * 2 * 2 + x.cos()).sum(dim=0)
    assert torch.allclose(out.cpu(), expected, atol=1e-5)


def test_an_op_the_device_lacks_fails_when_the_graph_runs(sim_compile, use_profile):
    use_profile({"unsupported_ops": ["aten.cos.default"]})
    with pytest.raises(NotImplementedError, match="aten::cos"):
        torch.compile(_f, backend="sim")(torch.randn(4, 3).to("sim"))


def test_backward_graph_runs_on_sim(sim_compile):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    x = torch.randn(5, 3)
    model(x).relu().sum().backward()
    expected = model.weight.grad.clone()
    sim_model = torch.nn.Linear(3, 2).to("sim")
    with torch.no_grad():
        sim_model.weight.copy_(model.weight.to("sim"))
        sim_model.bias.copy_(model.bias.to("sim"))
    torch.compile(lambda a: sim_model(a).relu().sum(), backend="sim")(x.to("sim")).backward()
    assert sim_model.weight.grad.device.type == "sim"
    assert torch.allclose(sim_model.weight.grad.cpu(), expected, atol=1e-6)


def test_data_dependent_code_breaks_the_graph_and_still_runs(sim_compile):
    def f(t):
        return t[t > 0].sum() + t.nonzero().shape[0]

    x = torch.randn(6, 2)
    out = torch.compile(f, backend="sim")(x.to("sim"))
    assert torch.allclose(out.cpu(), f(x))


def test_the_compile_backend_is_handed_plain_sim_tensors(sim_device):
    from conformance.sim import compiler

    seen, graphs = [], []

    def recording(gm, example_inputs):
        seen.extend(example_inputs)
        return compiler.sim_backend(gm, example_inputs)

    torch._dynamo.reset()
    with compiler.observe_graphs(graphs.append):
        out = torch.compile(lambda t: t.sin() * 2, backend=recording)(torch.randn(3).to("sim"))
    assert out.device.type == "sim"
    assert seen and all(type(t) is torch.Tensor and t.device.type == "sim" for t in seen)
    placeholders = [n.meta["val"] for g in graphs for n in g.graph.nodes if n.op == "placeholder"]
    assert placeholders and all(v.device.type == "sim" for v in placeholders)
