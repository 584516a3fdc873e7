"""The runtime half of `neuron-check SCRIPT.py`: the script really runs (on `sim`) in a child.

Each test copies a fixture script from scripts/ into a temporary directory and runs the CLI
there, so user sites read `NAME.py:LINE`. Lines are located by `# MARK: name` comments, so
the assertions name the exact line.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"
REPO = Path(__file__).resolve().parents[2]


def mark_line(script: str, mark: str) -> int:
    for number, line in enumerate((SCRIPTS / script).read_text().splitlines(), 1):
        if f"# MARK: {mark}" in line:
            return number
    raise AssertionError(f"no MARK {mark} in {script}")


def port(tmp: Path, script: str, *options: str, profile: dict | None = None) -> tuple[subprocess.CompletedProcess, dict | None]:
    shutil.copy(SCRIPTS / script, tmp / script)
    args = [sys.executable, "-m", "porting_cli", script, "--device", "sim", "--format", "json", *options]
    if profile is not None:
        (tmp / "profile.json").write_text(json.dumps(profile))
        args += ["--sim-profile", "profile.json"]
    env = {k: v for k, v in __import__("os").environ.items() if k != "NEURON_CHECK_SIM_PROFILE"}
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run(args, cwd=tmp, capture_output=True, text=True, timeout=240, env=env)
    report = json.loads(out.stdout) if out.stdout.strip().startswith("{") else None
    return out, report


def op_row(report: dict, op: str) -> dict:
    rows = [r for r in report["ops"] if r["op"] == op]
    assert rows, f"{op} not in the op table: {[r['op'] for r in report['ops']]}"
    return rows[0]


NO_LAYER_NORM = {"name": "no-layernorm", "unsupported_ops": ["aten.native_layer_norm.default"]}


def test_unsupported_layer_norm_blocks_and_names_the_op_and_its_line(tmp_path):
    out, report = port(tmp_path, "layernorm_train.py", profile=NO_LAYER_NORM)
    assert out.returncode == 0, out.stderr
    assert report["verdict"] == "blocked"
    row = op_row(report, "aten.native_layer_norm.default")
    assert row["status"] == "UNSUPPORTED" and row["source"] == "live"
    assert row["sites"][0] == f"layernorm_train.py:{mark_line('layernorm_train.py', 'layer_norm')}"
    assert any("aten.native_layer_norm.default is UNSUPPORTED" in r for r in report["reasons"])
    assert report["runtime"]["exception"]["type"] == "NotImplementedError"
    # Ops before it ran; ops after it were never reached.
    assert op_row(report, "aten.addmm.default")["status"] == "ran"
    assert not any(r["op"].startswith("aten.native_layer_norm_backward") for r in report["ops"])


def test_cuda_script_runs_on_sim_by_remapping_and_stops_after_two_steps(tmp_path):
    out, report = port(tmp_path, "layernorm_train.py")
    assert out.returncode == 0, out.stderr
    runtime = report["runtime"]
    assert runtime["device"] == "sim" and runtime["simulated"] is True
    assert runtime["outcome"] == "stopped-steps" and runtime["steps"] == 2
    assert runtime["output_tail"] == ["step 0"]  # the second step stopped the script inside opt.step()
    remapped = {(r["site"], r["what"]) for r in report["remapped"]}
    assert (f"layernorm_train.py:{mark_line('layernorm_train.py', 'module_cuda')}", "Module.cuda() -> .to('sim')") in remapped
    assert (f"layernorm_train.py:{mark_line('layernorm_train.py', 'factory_device')}",
            "randn(device='cuda') -> 'sim'") in remapped
    # Backward ops are attributed to the loss.backward() line.
    backward = op_row(report, "aten.native_layer_norm_backward.default")
    assert backward["sites"] == [f"layernorm_train.py:{mark_line('layernorm_train.py', 'backward')}"]
    assert backward["count"] == 2 and backward["dtypes"] == ["float32"]
    assert all(r["status"] == "ran" for r in report["ops"])
    assert report["verdict"] == "ready-with-fixes"  # .cuda() and device="cuda" need the (automatic) fix
    assert runtime["divergence"]["status"] == "PASS"


def test_max_steps_zero_runs_to_the_end_and_scale_fault_is_caught_by_divergence(tmp_path):
    profile = {"name": "scaled", "faults": [{"op": "aten.native_layer_norm.default", "kind": "scale", "value": 1.5}]}
    out, report = port(tmp_path, "layernorm_train.py", "--max-steps", "0", profile=profile)
    assert out.returncode == 0, out.stderr
    assert report["runtime"]["outcome"] == "finished" and report["runtime"]["steps"] == 100
    divergence = report["runtime"]["divergence"]
    assert divergence["status"] == "MISMATCH" and divergence["module"] == "norm"


def test_endless_loop_is_stopped_at_max_seconds_with_a_partial_report(tmp_path):
    out, report = port(tmp_path, "endless.py", "--max-seconds", "5")
    assert out.returncode == 0, out.stderr
    runtime = report["runtime"]
    assert runtime["outcome"] == "stopped-time" and runtime["partial"] is True
    assert "stopped after 5 s" in runtime["outcome_text"] and 5 <= runtime["seconds"] < 15
    sin = op_row(report, "aten.sin.default")
    assert sin["sites"] == [f"endless.py:{mark_line('endless.py', 'sin')}"] and sin["count"] > 1


def test_script_that_raises_reports_the_users_frame_and_fail_on_blocked_exits_1(tmp_path):
    out, report = port(tmp_path, "raises.py", "--fail-on", "blocked")
    assert out.returncode == 1, out.stderr
    exc = report["runtime"]["exception"]
    assert exc["type"] == "ValueError" and exc["message"] == "batch file is missing"
    assert exc["site"] == f"raises.py:{mark_line('raises.py', 'raise')}"
    assert exc["user_traceback"][-1].startswith(f"raises.py:{mark_line('raises.py', 'raise')} in load_batch")
    assert report["verdict"] == "blocked"
    assert any("raised ValueError at raises.py:" in r for r in report["reasons"])
    assert op_row(report, "aten.mul.Tensor")["status"] == "ran"  # the partial op table is kept


@pytest.mark.parametrize("script, code", [("exits.py", 3), ("os_exits.py", 4)])
def test_sys_exit_and_os_exit_count_as_finishing_with_the_code_noted(tmp_path, script, code):
    out, report = port(tmp_path, script)
    assert out.returncode == 0, out.stderr
    runtime = report["runtime"]
    assert runtime["outcome"] == "exit" and runtime["exit_code"] == code
    assert report["verdict"] == "ready-with-fixes"  # only the fixable device findings
    assert op_row(report, "aten.add.Tensor" if script == "exits.py" else "aten.mul.Tensor")["status"] == "ran"
    if script == "exits.py":
        site = f"exits.py:{mark_line('exits.py', 'to_cuda')}"
        assert {"site": site, "what": "to(device='cuda:0') -> 'sim'", "count": 1} in report["remapped"]


def test_against_predicts_ops_the_script_never_reached_live(tmp_path):
    (tmp_path / "against.json").write_text(json.dumps(
        {"name": "measured", "unsupported_ops": ["aten.addmm.default", "aten.native_layer_norm.default"]}))
    no_addmm = {"name": "no-addmm", "unsupported_ops": ["aten.addmm.default"]}
    out, report = port(tmp_path, "layernorm_train.py", "--against", "against.json", profile=no_addmm)
    assert out.returncode == 0, out.stderr
    addmm = op_row(report, "aten.addmm.default")
    assert (addmm["status"], addmm["source"], addmm["predicted"]) == ("UNSUPPORTED", "live", "UNSUPPORTED")
    norm = op_row(report, "aten.native_layer_norm.default")  # after the failure: learned from a CPU run
    assert (norm["status"], norm["source"]) == ("UNSUPPORTED", "predicted")
    assert norm["sites"] == [f"layernorm_train.py:{mark_line('layernorm_train.py', 'layer_norm')}"]
    assert op_row(report, "aten.pow.Tensor_Scalar")["status"] == "ran"
    assert report["runtime"]["reach_run"] is True


def test_unknown_device_is_one_sentence_and_exit_2(tmp_path):
    out, report = port(tmp_path, "exits.py", "--device", "nosuch")
    assert out.returncode == 2 and report is None
    assert out.stderr.startswith("neuron-check: error: unknown device 'nosuch'")
    assert "Traceback" not in out.stderr


AUTOCAST_FORMS = {  # MARK in autocast_forms.py -> what the remap log says there
    "keyword": "autocast('cuda') -> autocast('sim')",
    "amp_positional": "autocast('cuda') -> autocast('sim')",
    "cuda_amp": "torch.cuda.amp.autocast -> torch.amp.autocast('sim')",
    "cuda_amp_off": "torch.cuda.amp.autocast -> torch.amp.autocast('sim')",
    "partial": "autocast('cuda') -> autocast('sim')",
    "nullcontext": "autocast('cuda') -> autocast('sim')",
}


def test_every_autocast_calling_form_is_remapped_and_keeps_its_dtype_and_enabled_flag(tmp_path):
    out, report = port(tmp_path, "autocast_forms.py")
    assert out.returncode == 0, out.stderr
    runtime = report["runtime"]
    assert runtime["outcome"] == "finished" and runtime["exception"] is None
    assert runtime["output_tail"] == ["keyword torch.bfloat16", "amp torch.float16", "cuda_amp torch.bfloat16",
                                      "cuda_amp_off torch.float32", "partial torch.bfloat16",
                                      "nullcontext torch.bfloat16"]
    remapped = {(r["site"], r["what"]) for r in report["remapped"]}
    for mark, what in AUTOCAST_FORMS.items():
        assert (f"autocast_forms.py:{mark_line('autocast_forms.py', mark)}", what) in remapped, mark
    assert report["verdict"] == "ready-with-fixes"


def test_pin_memory_is_kept_on_a_target_with_pinned_host_memory(tmp_path):
    out, report = port(tmp_path, "pin_memory.py", "--max-steps", "0")
    assert out.returncode == 0, out.stderr
    assert report["runtime"]["outcome"] == "finished", report["runtime"]
    assert report["runtime"]["output_tail"] == ["pinned True"]  # sim pins host memory, as CUDA does
    assert not [r for r in report["remapped"] if "pin" in r["what"].lower()]


class _Sites:
    """UserFrames stand-in: every call is the user's, at one site."""

    def site(self):
        return "script.py:1"

    def is_user(self, filename):
        return True


def test_pinning_is_dropped_and_logged_where_the_target_has_no_pinned_memory():
    import torch

    from porting_cli.remap import DeviceRemapMode
    from porting_cli.remap_libs import library_patches
    from porting_cli.remap_log import RemapLog

    log = RemapLog(_Sites())
    (owner, name, init), = [p for p in library_patches("cpu", log, pinning=False) if p[1] == "__init__"
                            and p[0] is torch.utils.data.DataLoader]
    saved = owner.__init__
    owner.__init__ = init
    try:
        with DeviceRemapMode("cpu", log, pinning=False):
            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(2)), pin_memory=True)
            staging = torch.empty(2, pin_memory=True)
            unpinned = torch.ones(2).pin_memory()
            assert not (loader.pin_memory or staging.is_pinned() or unpinned.is_pinned())
    finally:
        owner.__init__ = saved
    assert {what for _, what in log.counts} == {
        "DataLoader(pin_memory=True) -> pin_memory=False (cpu has no pinned memory)",
        "empty(pin_memory=True) -> pin_memory=False (cpu has no pinned memory)",
        "Tensor.pin_memory() -> unpinned (cpu has no pinned memory)",
    }


def test_ops_of_a_thread_without_user_frames_are_blamed_on_the_line_that_started_it(tmp_path):
    out, report = port(tmp_path, "thread_ops.py")
    assert out.returncode == 0, out.stderr
    sin = op_row(report, "aten.sin.default")
    assert sin["sites"] == [f"thread_ops.py:{mark_line('thread_ops.py', 'start')}"]


def test_cuda_event_timing_runs_on_the_targets_events_and_measures_time(tmp_path):
    out, report = port(tmp_path, "event_timing.py", "--max-steps", "100")
    assert out.returncode == 0, out.stderr
    assert report["verdict"] != "blocked", report["runtime"]
    assert report["runtime"]["outcome"] == "finished", report["runtime"]
    assert report["runtime"]["output_tail"] == ["elapsed_ms_positive True"] * 3
    remapped = {(r["site"], r["what"]) for r in report["remapped"]}
    assert (f"event_timing.py:{mark_line('event_timing.py', 'events')}", "torch.cuda.Event -> torch.Event('sim')") in remapped
