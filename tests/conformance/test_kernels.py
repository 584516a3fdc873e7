"""The custom-kernel suite on sim: the example library (examples/kernels/) passes clean, and each
planted bug gives its status on exactly its items; discovery and bad TARGETs; family samples."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from op_db.records import Status

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "kernels"
FLASH, MOE, NORM = "flash_attention", "grouped_matmul", "rms_norm"
NUMERICS = {"forward", "backward"}
FAKE = {"opcheck.fake", "opcheck.aot_dispatch_dynamic"}
# opcheck.autograd_registration does not run the kernel (the op has an autograd kernel) and
# opcheck.aot_dispatch_dynamic runs on the first sample, where every expert has tokens.
RUNS_EVERY_SAMPLE = NUMERICS | {"opcheck.schema", "opcheck.fake"}

# bug -> (op, variants, dtypes or None for all, status): the items it must fail; every other
# item of its namespace must PASS.
PLANTED = {
    "causal_off_by_one": (FLASH, NUMERICS, None, Status.MISMATCH),
    "bf16_scale": (FLASH, NUMERICS, {"bfloat16"}, Status.MISMATCH),
    "no_fake": (MOE, FAKE, None, Status.ERROR),
    "wrong_fake_shape": (NORM, FAKE, None, Status.ERROR),
    "ignores_strides": (NORM, NUMERICS, None, Status.MISMATCH),
    "empty_expert_crash": (MOE, RUNS_EVERY_SAMPLE, None, Status.ERROR),
}


def write_target(folder: Path, body: str) -> str:
    path = folder / "target.py"
    path.write_text(f"import sys\nsys.path.insert(0, {str(EXAMPLES)!r})\n" + textwrap.dedent(body))
    return str(path)


def run_in_process(target: str, **options) -> dict:
    """Every planned item of `target` run in this process, as a worker runs them."""
    from conformance import backends
    from conformance.engine.config import RunConfig, WorkerContext
    from conformance.kernels import plan, run

    kernel_options = plan.KernelOptions(target=target, **options)
    adapter, device = backends.resolve("sim")
    adapter.init()
    ctx = WorkerContext(RunConfig(backend="sim", device=device, suite_options=kernel_options), adapter)
    run.prepare(ctx)
    return {item: run.run_item(item, ctx) for item in plan.plan(kernel_options)}


@pytest.fixture(scope="module")
def planted_results(tmp_path_factory, sim_device):
    """One namespace per planted bug, all three ops in each, with --grad; in float32, and for the
    bf16-only bug in bfloat16 too (its float32 items must pass)."""
    folder = tmp_path_factory.mktemp("planted")
    body = "import library\n" + "".join(f"library.register('kb_{bug}', bugs=[{bug!r}])\n" for bug in PLANTED)
    target = write_target(folder, body)
    in_fp32 = tuple(f"kb_{bug}::*" for bug in PLANTED if bug != "bf16_scale")
    return {**run_in_process(target, ops=in_fp32, dtypes=("fp32",), grad=True, max_samples=6),
            **run_in_process(target, ops=("kb_bf16_scale::*",), dtypes=("fp32", "bf16"), grad=True, max_samples=6)}


@pytest.mark.slow
@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_a_planted_bug_fails_exactly_its_items(planted_results, bug):
    op, variants, dtypes, status = PLANTED[bug]
    mine = {item: result for item, result in planted_results.items() if item.subject.startswith(f"kb_{bug}::")}
    dtypes_run = 2 if bug == "bf16_scale" else 1
    assert len(mine) == 3 * dtypes_run * 6  # three ops, four opchecks + forward + backward
    for item, result in mine.items():
        hit = item.subject == f"kb_{bug}::{op}" and item.variant in variants and (dtypes is None or item.dtype in dtypes)
        expected = status if hit else Status.PASS
        assert result.status == expected, (item, result.message, result.first_failure)
        if hit:
            assert result.first_failure and "sample" in result.first_failure  # names the input that broke it


@pytest.mark.slow
def test_a_mismatch_names_the_sample_that_broke_it(planted_results):
    result = next(r for i, r in planted_results.items()
                  if i.subject == "kb_ignores_strides::rms_norm" and i.variant == "forward" and i.dtype == "float32")
    assert "transposed" in result.first_failure or "strided" in result.first_failure
    assert result.max_abs_err and result.max_abs_err > 0.01


@pytest.fixture(scope="module")
def clean_results(sim_device):
    return run_in_process(str(EXAMPLES / "target.py"), dtypes=("fp32", "bf16", "fp16"), grad=True)


@pytest.mark.slow
def test_the_example_library_passes_clean_on_a_fault_free_sim(clean_results):
    assert len(clean_results) == 3 * 3 * 6
    failed = {item: (r.status, r.message) for item, r in clean_results.items() if r.status != Status.PASS}
    assert not failed
    forward = next(r for i, r in clean_results.items() if i.subject == f"exkern::{FLASH}" and i.variant == "forward")
    assert forward.samples >= 10 and forward.samples_passed == forward.samples
    assert forward.max_abs_err is not None  # how close a PASS was


def test_the_device_kernel_is_the_one_that_runs(sim_device):
    """A kernel registered for sim is dispatched to (not the CPU one): the planted bug shows."""
    import torch

    sys.path.insert(0, str(EXAMPLES))
    try:
        import library
    finally:
        sys.path.remove(str(EXAMPLES))
    library.register("kb_dispatch", bugs=["bf16_scale"])
    q = torch.randn(1, 2, 8, 16, dtype=torch.bfloat16)
    on_cpu = torch.ops.kb_dispatch.flash_attention(q, q, q)
    on_sim = torch.ops.kb_dispatch.flash_attention(q.to("sim"), q.to("sim"), q.to("sim")).cpu()
    assert type(q.to("sim")) is torch.Tensor
    assert (on_cpu.float() - on_sim.float()).abs().max() > 0.01


def test_compile_mode_needs_a_fake_kernel(tmp_path, sim_device):
    target = write_target(tmp_path, "import library\nlibrary.register('kc_no_fake', bugs=['no_fake'])\n")
    results = run_in_process(target, ops=("kc_no_fake::grouped_matmul", "kc_no_fake::rms_norm"), dtypes=("fp32",),
                             grad=True, modes=("compile",))
    statuses = {(i.subject.split("::")[1], i.variant): r.status for i, r in results.items()}
    assert statuses == {(MOE, "forward"): Status.ERROR, (MOE, "backward"): Status.ERROR,
                        (NORM, "forward"): Status.PASS, (NORM, "backward"): Status.PASS}
    failed = next(r for i, r in results.items() if i.subject.endswith(MOE) and i.variant == "forward")
    assert "fake" in failed.message.lower()
    passed = next(r for i, r in results.items() if i.subject.endswith(NORM) and i.variant == "forward")
    assert passed.compile["graph_breaks"] == 0


# -- families: each generator's samples fit its documented convention ---------------------------

FAMILY_OPS = {
    "softmax": ("(Tensor x, int dim) -> Tensor", "torch.softmax(x, dim)"),
    "matmul": ("(Tensor a, Tensor b) -> Tensor", "a @ b"),
    "rotary": ("(Tensor x, Tensor cos, Tensor sin) -> Tensor",
               "x * cos + torch.cat([-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]], -1) * sin"),
    "norm": ("(Tensor x, Tensor weight, float eps) -> Tensor",
             "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight"),
}


def test_family_samples_run_through_a_plain_reference_on_the_device(tmp_path, sim_device):
    """An op with only a CompositeExplicitAutograd kernel runs the same plain code on CPU and sim:
    every family sample must be valid input for its convention and pass, forward and backward."""
    lines = ["import torch", "from conformance import kernels", "lib = torch.library.Library('kf', 'DEF')"]
    for family, (schema, body) in FAMILY_OPS.items():
        args = schema.split("->")[0].strip("() ").split(", ")
        names = ", ".join(a.split()[1] for a in args)
        lines += [f"lib.define('{family}{schema}')",
                  f"def {family}_impl({names}):\n    return {body}",
                  f"lib.impl('{family}', {family}_impl, 'CompositeImplicitAutograd')",
                  f"kernels.family('kf::{family}', '{family}')"]
    target = tmp_path / "families.py"
    target.write_text("\n".join(lines) + "\n")
    results = run_in_process(str(target), dtypes=("fp32",), grad=True)
    numerics = {i: r for i, r in results.items() if i.variant in NUMERICS}
    assert {i.subject for i in numerics} == {f"kf::{f}" for f in FAMILY_OPS}
    assert all(r.status == Status.PASS and r.samples >= 4 for r in numerics.values()), \
        {i: (r.status, r.message) for i, r in numerics.items()}


def test_attention_samples_cover_the_edge_shapes():
    import torch

    from conformance.kernels.families import attention

    schema = torch._C.parse_schema("x::a(Tensor q, Tensor k, Tensor v, bool causal=False, int window=-1, "
                                   "Tensor? key_padding_mask=None) -> Tensor")
    samples = list(attention.generate(schema, torch.float32, False))
    shapes = [(q.shape, k.shape, q.is_contiguous(), kwargs) for (q, k, v), kwargs, _ in samples]
    assert any(q[2] == 1 and k[2] > 1 for q, k, _, _ in shapes)  # one-token decode
    assert any(q[1] != k[1] and k[1] > 1 for q, k, _, _ in shapes)  # GQA
    assert any(k[1] == 1 and q[1] > 1 for q, k, _, _ in shapes)  # MQA
    assert any(q[0] == 0 for q, _, _, _ in shapes)  # empty batch
    assert any(not contiguous for _, _, contiguous, _ in shapes)
    assert any(q[2] % 16 for q, _, _, _ in shapes)  # not a multiple of a tile
    assert {kw.get("causal") for *_, kw in shapes} >= {True, False}
    assert any("window" in kw for *_, kw in shapes) and any("key_padding_mask" in kw for *_, kw in shapes)


# -- the command: discovery and what TARGET fails to define --------------------------------------

def invoke(*args):
    from porting_cli.cli.app import main

    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("body, phrase", [
    ("x = 1\n", "registered no custom ops"),
    ("import torch\nlib = torch.library.Library('kn_bare', 'DEF')\nlib.define('op(Tensor x) -> Tensor')\n",
     "kn_bare::op has no reference and no samples"),
    ("raise RuntimeError('boom')\n", "importing"),
])
def test_a_target_that_defines_too_little_is_one_sentence_and_exit_2(tmp_path, body, phrase):
    (tmp_path / "lib.py").write_text(body)
    result = invoke("kernels", tmp_path / "lib.py", "--device", "sim", "--db", tmp_path / "k.db")
    assert result.exit_code == 2, result.output
    assert phrase in result.output and "Traceback" not in result.output
    assert not (tmp_path / "k.db").exists()


@pytest.mark.parametrize("args, phrase", [
    (["--op", "exkern::nope*"], "matches no op"),
    (["--family", "convolution"], "unknown family"),
    (["--dtype", "fp8"], "no FP8 samples"),
])
def test_bad_selection_is_one_sentence_and_exit_2(tmp_path, args, phrase, sim_device):
    result = invoke("kernels", EXAMPLES / "target.py", "--device", "sim", "--db", tmp_path / "k.db", *args)
    assert result.exit_code == 2, result.output
    assert phrase in result.output


def test_missing_target_file_is_exit_2(tmp_path):
    result = invoke("kernels", tmp_path / "nowhere.py", "--device", "sim", "--db", tmp_path / "k.db")
    assert result.exit_code == 2 and "no such file" in result.output


@pytest.mark.slow
def test_the_command_stores_results_and_fails_on_a_planted_bug(tmp_path):
    """End to end in a child process, through the engine and the store: --fail-on trips."""
    target = write_target(tmp_path, "import library\nlibrary.register('ke_scale', bugs=['bf16_scale'])\n")
    db = tmp_path / "k.db"
    done = subprocess.run([sys.executable, "-m", "porting_cli", "kernels", target, "--device", "sim", "--db", str(db),
                           "--op", "ke_scale::flash_attention", "--dtype", "fp32,bf16", "--fail-on", "MISMATCH"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    from op_db.store import Store

    store = Store.open(str(db))
    try:
        rows = {(r.variant, r.dtype): r.status for r in store.results(store.resolve_run("latest"))}
    finally:
        store.close()
    assert rows[("forward", "bfloat16")] == Status.MISMATCH and rows[("forward", "float32")] == Status.PASS
    assert rows[("opcheck.schema", "bfloat16")] == Status.PASS


def test_the_documented_library_is_the_shipped_one_and_passes(sim_device):
    """docs/kernels.md's complete example is examples/kernels/mylib.py, word for word, and passes."""
    import re

    page = (REPO / "docs" / "kernels.md").read_text()
    assert re.search(r"```python\n(.*?)```", page, re.S).group(1) == (EXAMPLES / "mylib.py").read_text()
    results = run_in_process(str(EXAMPLES / "mylib.py"), dtypes=("fp32", "bf16"), grad=True)
    assert {r.status for r in results.values()} == {Status.PASS}, {i: r.message for i, r in results.items()}
