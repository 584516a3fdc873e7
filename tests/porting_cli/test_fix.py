"""Fixes: exact rewrites, round trips, and fixed scripts that run on a CPU-only machine."""

from __future__ import annotations

import ast
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from porting_cli.analysis.fix import fix_file, fix_source, unified_diff
from porting_cli.analysis.scan import scan_source

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXAMPLES = ROOT / "examples"
PRELUDE = ("\n# neuron-check: the current accelerator, or the CPU where there is none\n"
           'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n')

REWRITES = [
    ("import torch\nx = x.cuda()\n", "import torch\n" + PRELUDE + "x = x.to(DEVICE)\n"),
    ("import os\nimport torch\nrank = int(os.environ['LOCAL_RANK'])\nx = x.cuda(rank, non_blocking=True)\n",
     "import os\nimport torch\n" + PRELUDE + "rank = int(os.environ['LOCAL_RANK'])\n"
     "x = x.to(torch.device(DEVICE.type, rank), non_blocking=True)\n"),
    ('import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n',
     "import torch\n" + PRELUDE + 'device = DEVICE.type if torch.accelerator.is_available() else "cpu"\n'),
    ("import torch\nfor i in range(2):\n    torch.cuda.synchronize()  # wait\n",
     "import torch\nfor i in range(2):\n    if torch.accelerator.is_available():\n"
     "        torch.accelerator.synchronize()  # wait\n"),
    ("import torch\nmb = torch.cuda.memory_allocated() / 2**20\n",
     "import torch\n" + PRELUDE + "\n\n# neuron-check: a torch.accelerator memory statistic; `default` where "
     "the backend keeps none\ndef device_memory(name, default, *args, **kwargs):\n"
     "    if not torch.accelerator.is_available():\n        return default\n    try:\n"
     "        return getattr(torch.accelerator, name)(*args, **kwargs)\n"
     "    except RuntimeError:  # the backend's allocator keeps no statistics\n        return default\n\n\n"
     'mb = device_memory("memory_allocated", 0) / 2**20\n'),
    ("import torch\ntorch.cuda.manual_seed_all(0)\n", "import torch\n" + PRELUDE +
     "if torch.accelerator.is_available():\n    torch.get_device_module(DEVICE).manual_seed_all(0)\n"),
    ("import torch\nwith torch.cuda.amp.autocast(True, torch.float16):\n    pass\n",
     "import torch\n" + PRELUDE +
     "with torch.amp.autocast(DEVICE.type, enabled=True, dtype=torch.float16):\n    pass\n"),
    ("from torch.cuda.amp import GradScaler\ns = GradScaler(init_scale=1024)\n",
     "from torch.amp import GradScaler\nimport torch\n" + PRELUDE +
     "s = GradScaler(DEVICE.type, init_scale=1024)\n"),
    ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = args.tf32\n",
     'import torch\ntorch.set_float32_matmul_precision("high" if args.tf32 else "highest")\n'),
    ('import torch\nimport torch.distributed as dist\ndist.init_process_group("nccl")\n',
     "import torch\nimport torch.distributed as dist\n" + PRELUDE +
     "dist.init_process_group(torch.distributed.get_default_backend_for_device(DEVICE))\n"),
    ('import torch\nm = M.from_pretrained("m", device_map={"": 0})\n',
     "import torch\n" + PRELUDE + 'm = M.from_pretrained("m", device_map=torch.device(DEVICE.type, 0))\n'),
    ('import torch\ns = torch.cuda.Stream()\n', "import torch\n" + PRELUDE + "s = torch.Stream(DEVICE)\n"),
    # no `import torch` yet: the fix adds it
    ('"""Doc."""\nimport os\ny = x.to("cuda")\n',
     '"""Doc."""\nimport os\nimport torch\n' + PRELUDE + "y = x.to(DEVICE)\n"),
    # DEVICE is taken: another name is used
    ("import torch\nDEVICE = 3\nx = x.cuda()\n",
     "import torch\n" + PRELUDE.replace("DEVICE =", "ACCEL_DEVICE =") + "DEVICE = 3\nx = x.to(ACCEL_DEVICE)\n"),
    # torch.device(index) on torch 2.4: test_scan_torch_semantics.py
]


@pytest.mark.parametrize("old, new", REWRITES)
def test_rewrite(old, new):
    assert fix_source(old).new_text == new


ROUND_TRIP = [*sorted(FIXTURES.glob("cuda_*.py")), *sorted(FIXTURES.glob("idioms_*.py")),
              *sorted(EXAMPLES.glob("*.py"))]


@pytest.mark.parametrize("path", ROUND_TRIP, ids=lambda p: p.name)
def test_round_trip(path):
    old = path.read_text()
    result = fix_source(old, str(path))
    ast.parse(result.new_text)
    assert result.applied and all(f.fixable for f in result.applied)
    after = scan_source(result.new_text).findings
    assert [f for f in after if f.fixable] == []
    # NC109 / NC306 describe what follows from CUDA code elsewhere (a CUDA test choosing
    # `fused`, a class wrapping torch.cuda.amp); once that code is fixed they have no cause
    # `fused`, a class wrapping torch.cuda.amp); NC111 an index the data flow traced from a CUDA call
    # (`torch.cuda.current_device()`, `range(torch.cuda.device_count())`), which the fix replaced
    dependent = {"NC109", "NC306", "NC111"}
    assert sorted(f.rule_id for f in after if f.rule_id not in {"NC999", "NC111"}) == sorted(
        f.rule_id for f in result.remaining if f.rule_id not in dependent | {"NC999"})
    assert sum(f.rule_id == "NC111" for f in after) <= sum(f.rule_id == "NC111" for f in result.remaining)
    # the net may speak up on a fixed line that still names CUDA (`use_cuda = torch.accelerator...`)
    assert sum(f.rule_id == "NC999" for f in after) >= sum(f.rule_id == "NC999" for f in result.remaining)
    assert fix_source(result.new_text).new_text == result.new_text  # idempotent
    # only lines with a fixable finding, or an edit those fixes need, change (the rest is kept byte for byte)
    fixed_lines = {f.line for f in result.applied} | result.companion_lines
    removed = [line for line in result.diff().splitlines()
               if line.startswith("-") and not line.startswith("---")]
    flagged = {old.splitlines()[n - 1] for n in fixed_lines}
    assert all(line[1:] in flagged for line in removed)


def test_clean_file_is_left_alone():
    text = (FIXTURES / "clean_train.py").read_text()
    result = fix_source(text)
    assert result.new_text == text and not result.changed and result.applied == []


def test_unified_diff():
    diff = unified_diff("m.py", "a\nb\n", "a\nc\n")
    assert diff.startswith("--- a/m.py\n+++ b/m.py\n") and "-b\n+c\n" in diff
    assert unified_diff("m.py", "same\n", "same\n") == ""


def test_fix_file_keeps_the_original(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\nx = torch.zeros(1).cuda()\n")
    result = fix_file(script)
    assert (tmp_path / "train.py.orig").read_text() == "import torch\nx = torch.zeros(1).cuda()\n"
    assert script.read_text() == result.new_text and "to(DEVICE)" in result.new_text
    dry = tmp_path / "dry.py"
    dry.write_text("x = x.cuda()\n")
    fix_file(dry, write=False)
    assert dry.read_text() == "x = x.cuda()\n" and not (tmp_path / "dry.py.orig").exists()


# -- fixed scripts run on the CPU -------------------------------------------------

#: Runs a CUDA script on the CPU by patching CUDA out (the reference for the fixed script).
CPU_PATCH = r"""
import runpy, sys, torch
torch.Tensor.cuda = lambda self, *a, **k: self
torch.nn.Module.cuda = lambda self, *a, **k: self
for name in ("synchronize", "empty_cache", "reset_peak_memory_stats"):
    setattr(torch.cuda, name, lambda *a, **k: None)
torch.cuda.max_memory_allocated = torch.cuda.memory_allocated = lambda *a, **k: 0
torch.cuda.manual_seed_all = torch.cuda.manual_seed = lambda *a, **k: None
torch.cuda.amp.autocast = lambda enabled=True, dtype=torch.float16, cache_enabled=True: \
    torch.amp.autocast("cpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)
torch.cuda.amp.GradScaler = lambda *a, **k: torch.amp.GradScaler("cpu", *a, **k)
_to = torch.Tensor.to
torch.Tensor.to = lambda self, *a, **k: _to(self, *("cpu" if x == "cuda" else x for x in a), **k)
_randn = torch.randn
torch.randn = lambda *a, **k: _randn(*a, **{**k, **({"device": "cpu"} if k.get("device") == "cuda" else {})})
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run(args, cwd, env=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": "", **(env or {})}, timeout=300)


def test_fixed_fixture_runs_on_cpu_like_the_cpu_patched_original(tmp_path):
    original = FIXTURES / "cuda_runnable.py"
    fixed = tmp_path / "fixed.py"
    fixed.write_text(fix_source(original.read_text()).new_text)
    broken = run([str(original)], tmp_path)
    assert broken.returncode != 0
    reference = run(["-c", CPU_PATCH, str(original)], tmp_path)
    assert reference.returncode == 0, reference.stderr
    result = run([str(fixed)], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "step 2 loss" in result.stdout and result.stdout == reference.stdout


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@pytest.mark.parametrize("name", ["gpt_amp_train.py", "hf_finetune.py", "ddp_train.py"])
def test_fixed_example_runs_on_cpu(tmp_path, name):
    fixed = tmp_path / name
    fixed.write_text(fix_source((EXAMPLES / name).read_text()).new_text)
    result = run([str(fixed), "--steps", "1", "--batch", "2"], tmp_path, {"MASTER_PORT": free_port()})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "step   0  loss" in result.stdout


DDP_SOURCE = ("import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
              "def wrap(model, rank):\n{place}    return DDP(model, device_ids=[rank], output_device=rank)\n")


def test_ddp_device_ids_are_no_finding_and_are_guarded_only_where_other_fixes_make_cpu_possible():
    # DDP takes device_ids for any single-device module: on an accelerator the line holds unchanged
    alone = DDP_SOURCE.format(place="")
    assert scan_source(alone).findings == [] and fix_source(alone).new_text == alone
    # the fix puts the model on "the accelerator, else the CPU", where DDP needs device_ids=None
    placed = DDP_SOURCE.format(place="    model = model.cuda(rank)\n")
    result = fix_source(placed)
    assert [f.line for f in scan_source(placed).findings] == [4]
    assert result.companion_lines == {5}
    assert ("DDP(model, device_ids=[rank] if torch.accelerator.is_available() else None, "
            "output_device=rank if torch.accelerator.is_available() else None)") in result.new_text
    assert fix_source(result.new_text).new_text == result.new_text


def test_the_lines_of_companion_edits_survive_the_scan_cache(tmp_path):
    from porting_cli.analysis.batch_scan import _fix_result, analyse
    from porting_cli.analysis.scan.cache import CachedScan

    text = DDP_SOURCE.format(place="    model = model.cuda(rank)\n")
    cached = CachedScan.from_json(analyse(text, "t.py").to_json(), "t.py")
    assert _fix_result("t.py", text, cached).companion_lines == {5}
