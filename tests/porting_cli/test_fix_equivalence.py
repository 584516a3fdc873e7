"""Fixed scripts behave on CUDA exactly as the originals do, and run on CPU and on sim.

The harness (tests/porting_cli/equivalence.py) runs a script on a pretend 2-GPU CUDA machine and
records device placements, autocast regions, grad scalers, seeds and synchronisations; the
original and the fixed script must record the same sequence. On a machine with CUDA the same
comparison runs for real.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from porting_cli.analysis.fix import fix_source
from porting_cli.analysis.scan import RULES

sys.path.insert(0, str(Path(__file__).resolve().parent))  # --import-mode=importlib: the helper module
from equivalence import record  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
EQUIVALENCE_FIXTURES = ["equiv_train.py", "cuda_runnable.py"]
#: fixable rules the harness cannot run on a CPU-only machine, and why
NOT_RUNNABLE = {
    "NC501": "NCCL process group: needs a distributed launch (covered by the DDP example tests)",
    "NC601": "torch.cuda.Stream(): a stream cannot be created without the device",
    "NC901": "device_map of from_pretrained: needs a model download",
    "NC112": "set_default_tensor_type(torch.cuda.FloatTensor): a CUDA default type cannot be set without "
             "CUDA (TypeError); test_scan_legacy_types.py runs the fixed default on sim",
    "NC921": "Lightning's accelerator= option: Lightning is not installed here (test_scan_frameworks.py "
             "checks the rewrite to accelerator=\"auto\")",
}


@pytest.fixture(autouse=True)
def older_torch_rules(monkeypatch):
    """The fixes are those of torch 2.4's rules: there a bare integer device is CUDA device N and
    its fix (NC104, NC106) must be proved like every other; on the installed torch (>= 2.5) an
    integer device is the current accelerator's, left as written (NC111, no fix), and
    test_scan_torch_semantics.py covers that."""
    from porting_cli.analysis.scan import torch_semantics

    monkeypatch.setattr(torch_semantics, "installed", lambda: torch_semantics.TorchSemantics((2, 4)))


def fixed_copy(name: str, tmp_path: Path) -> tuple[Path, Path, set[str]]:
    original = FIXTURES / name
    result = fix_source(original.read_text(), str(original))
    fixed = tmp_path / name
    fixed.write_text(result.new_text)
    return original, fixed, {f.rule_id for f in result.applied}


@pytest.mark.parametrize("name", EQUIVALENCE_FIXTURES)
def test_fixed_script_records_the_same_device_events_as_the_original(name, tmp_path):
    original, fixed, applied = fixed_copy(name, tmp_path)
    before = record(original)
    assert any(e[0] == "place" for e in before)
    assert record(fixed) == before


def test_every_fixable_rule_is_covered_by_the_harness(tmp_path):
    covered = set()
    for name in EQUIVALENCE_FIXTURES:
        covered |= fixed_copy(name, tmp_path)[2]
    fixable = {r.id for r in RULES if r.fixable}
    assert fixable - covered == set(NOT_RUNNABLE)


BAD_FIXES = [  # the rewrites neuron-check made before: the harness must reject them
    ("x = torch.ones(1).cuda(torch.device('cuda:1'))\n",
     "x = torch.ones(1).to(torch.device(DEVICE.type, torch.device('cuda:1')))\n"),
    ("torch.cuda.manual_seed_all(3)\n", "torch.manual_seed(3)\n"),
]


@pytest.mark.parametrize("original, bad", BAD_FIXES)
def test_the_harness_catches_a_rewrite_that_changes_cuda_behaviour(original, bad, tmp_path):
    head = "import torch\nDEVICE = torch.accelerator.current_accelerator() or torch.device('cpu')\n"
    good_path, bad_path = tmp_path / "good.py", tmp_path / "bad.py"
    good_path.write_text(head + original)
    bad_path.write_text(head + bad)
    try:
        assert record(bad_path) != record(good_path)
    except AssertionError as failed:  # the bad rewrite may also crash under the harness
        assert "failed under the recorder" in str(failed) or "!=" in str(failed)


def run(args: list[str], cwd: Path, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT), **(extra_env or {})}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


ON_SIM = "import runpy, sys\nimport conformance.sim as sim\nsim.register()\nrunpy.run_path(sys.argv[1], run_name='__main__')\n"


@pytest.mark.parametrize("name", EQUIVALENCE_FIXTURES)
def test_fixed_script_runs_on_cpu(name, tmp_path):
    _, fixed, _ = fixed_copy(name, tmp_path)
    on_cpu = run([str(fixed)], tmp_path)
    assert on_cpu.returncode == 0, on_cpu.stderr[-2000:]


def test_fixed_script_runs_on_sim(tmp_path):
    # The script uses cuda:1, so it runs on a machine with two devices: a sim profile gives two.
    _, fixed, _ = fixed_copy("equiv_train.py", tmp_path)
    (tmp_path / "two.json").write_text('{"name": "two devices", "devices": 2}')
    on_sim = run(["-c", ON_SIM, str(fixed)], tmp_path, {"NEURON_CHECK_SIM_PROFILE": str(tmp_path / "two.json")})
    assert on_sim.returncode == 0, on_sim.stderr[-2000:]


def test_on_a_cuda_machine_the_harness_runs_for_real(tmp_path):
    probe = run(["-c", "import torch, sys; sys.exit(0 if torch.cuda.device_count() >= 1 else 3)"], tmp_path)
    if probe.returncode == 3 or os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        pytest.skip("no CUDA device on this machine")
    original, fixed, _ = fixed_copy("equiv_train.py", tmp_path)
    assert record(fixed, real=True) == record(original, real=True)
