"""The runtime check across processes and hangs: DDP ranks via mp.spawn, hung children and
grandchildren (the whole tree is killed), and a hung op (a TIMEOUT op that blocks).

Each test runs the CLI on a fixture from scripts/ on `sim`, in a temporary folder.
"""

import json

import pytest

from porting_cli.runtime.trace import fold_records, merge_processes, result_of



def op_row(report: dict, op: str) -> dict:
    rows = [r for r in report["ops"] if r["op"] == op]
    assert rows, f"{op} not in the op table: {[r['op'] for r in report['ops']]}"
    return rows[0]


@pytest.mark.slow
def test_ddp_spawn_script_asking_for_nccl_runs_on_sims_process_group_and_records_both_ranks(neuron_check, marked, alive,
                                                                                       tmp_path):
    out, report = neuron_check("ddp_spawn.py", "--device", "sim", "--format", "json", copy=("ddp_spawn.py",))
    assert out.returncode == 0, out.stderr
    runtime = report["runtime"]
    assert runtime["exception"] is None and runtime["output_tail"][-1] == "all ranks done"
    assert runtime["outcome"] == "stopped-steps" and runtime["steps"] == 2
    ranks = sorted((p["rank"], p["outcome"], p["steps"]) for p in runtime["processes"] if p["rank"] is not None)
    assert ranks == [(0, "stopped-steps", 2), (1, "stopped-steps", 2)]
    assert all(p["ops"] > 0 for p in runtime["processes"] if p["rank"] is not None)
    assert [p["pid"] for p in runtime["processes"] if alive(p["pid"])] == []  # no rank left behind
    line = lambda mark: f"ddp_spawn.py:{marked(tmp_path / 'ddp_spawn.py', mark)}"  # noqa: E731
    forward = op_row(report, "aten.addmm.default")
    assert forward["processes"] == ["rank 0", "rank 1"] and line("forward") in forward["sites"]
    assert forward["status"] == "ran"
    remapped = {(r["site"], r["what"]): r["count"] for r in report["remapped"]}
    assert remapped[(line("init"), "init_process_group(backend='nccl') -> 'sim'")] == 2  # once per rank
    assert remapped[(line("batch"), "Tensor.cuda() -> .to('sim')")] == 4  # 2 ranks x 2 steps
    assert (line("ddp"), "DistributedDataParallel(device_ids=..., output_device=...) -> single-device defaults") in remapped
    ncrt = {f["line"] for f in report["findings"] if f["rule"] == "NCRT1"}
    assert marked(tmp_path / "ddp_spawn.py", "init") in ncrt and marked(tmp_path / "ddp_spawn.py", "ddp") in ncrt
    assert report["verdict"] == "ready-with-fixes"


@pytest.mark.slow
def test_torchrun_style_workers_are_traced_with_their_ranks(neuron_check, marked, tmp_path):
    out, report = neuron_check("torchrun_style.py", "--device", "sim", "--format", "json", copy=("torchrun_style.py",))
    assert out.returncode == 0, out.stderr
    runtime = report["runtime"]
    assert runtime["output_tail"][-1] == "workers exited [0, 0]"
    assert sorted(p["rank"] for p in runtime["processes"]) == [0, 1]
    assert {p["outcome"] for p in runtime["processes"]} == {"stopped-steps"}
    line = lambda mark: f"torchrun_style.py:{marked(tmp_path / 'torchrun_style.py', mark)}"  # noqa: E731
    assert op_row(report, "aten.addmm.default")["processes"] == ["rank 0", "rank 1"]
    assert line("forward") in op_row(report, "aten.addmm.default")["sites"]
    remapped = {(r["site"], r["what"]) for r in report["remapped"]}
    assert (line("init"), "init_process_group(backend='nccl') -> 'sim'") in remapped
    assert (line("set_device"), "torch.cuda.set_device() -> sim") in remapped


@pytest.mark.slow
def test_a_failing_rank_is_blamed_on_its_own_line_not_on_the_spawn_call(neuron_check, marked, tmp_path):
    out, report = neuron_check("rank_raises.py", "--device", "sim", "--format", "json", copy=("rank_raises.py",))
    assert out.returncode == 0, out.stderr
    exc = report["runtime"]["exception"]
    script = tmp_path / "rank_raises.py"
    assert (exc["type"], exc["message"]) == ("ValueError", "shard 1 is missing")
    assert exc["site"] == f"rank_raises.py:{marked(script, 'raise')}"
    assert exc["via"] == f"ProcessRaisedException at rank_raises.py:{marked(script, 'spawn')}"
    assert exc["user_traceback"][-2].startswith(f"rank_raises.py:{marked(script, 'call')} in work")
    assert exc["process"] == "rank 1"
    outcomes = dict((p["rank"], p["outcome"]) for p in report["runtime"]["processes"])
    # mp.spawn ends rank 0 once rank 1 fails; on a loaded machine that can come before rank 0 has
    # started tracing (still importing torch), and then it has no record to name it by.
    assert outcomes[1] == "raised" and outcomes.get(0, "terminated") in ("finished", "terminated")
    assert report["verdict"] == "blocked"
    why = f"the script raised ValueError at rank_raises.py:{marked(script, 'raise')} on the target"
    assert any(why in reason for reason in report["reasons"])


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_hung_child_and_setsid_grandchild_are_killed_at_max_seconds(neuron_check, alive, tmp_path, start_method):
    out, report = neuron_check("hang_child.py", "--device", "sim", "--max-seconds", "6", "--format", "json",
                               "--", "pids", start_method, copy=("hang_child.py",))
    assert out.returncode == 0, out.stderr
    runtime = report["runtime"]
    assert runtime["outcome"] == "stopped-time" and runtime["partial"] is True
    pids = {p.stem: int(p.read_text()) for p in (tmp_path / "pids").glob("*.pid")}
    assert set(pids) == {"main", "child", "grandchild"}
    assert [name for name, pid in pids.items() if alive(pid)] == []  # nothing left behind
    assert any("were ended" in note or "were killed" in note for note in runtime["notes"])


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--", "--block-alarm"]], ids=["alarm-stops-it", "parent-kills-it"])
def test_an_op_that_hangs_is_a_timeout_op_and_blocks(neuron_check, marked, tmp_path, extra):
    profile = {"name": "hang-erfinv", "faults": [{"op": "aten.erfinv.default", "kind": "hang"}]}
    out, report = neuron_check("hang_op.py", "--device", "sim", "--max-seconds", "5", "--format", "json",
                               *extra, copy=("hang_op.py",), profile=profile)
    assert out.returncode == 0, out.stderr
    row = op_row(report, "aten.erfinv.default")
    assert row["status"] == "TIMEOUT" and row["sites"] == [f"hang_op.py:{marked(tmp_path / 'hang_op.py', 'hang')}"]
    assert report["verdict"] == "blocked"
    why = f"aten.erfinv.default is TIMEOUT (on the target) at hang_op.py:{marked(tmp_path / 'hang_op.py', 'hang')}"
    assert any(why in reason for reason in report["reasons"]) and report["blocked_by"]
    assert op_row(report, "aten.mul.Tensor")["status"] == "ran"  # what ran before the hang is kept
    assert report["runtime"]["outcome"] == "stopped-time"


def write_records(path, *records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_slow_op_that_returned_is_no_timeout_and_one_still_running_at_the_kill_is(tmp_path):
    op = {"op": "aten.erfinv.default", "site": "s.py:3", "dtypes": ["float32"]}
    write_records(tmp_path / "records.jsonl",
                  {"kind": "start", "device": "sim", "backend": "sim", "simulated": True, "versions": {}},
                  {"kind": "op_running", "id": 1, **op}, {"kind": "op_done", "id": 1},
                  {"kind": "op_running", "id": 2, **op, "op": "aten.cos.default"})
    write_records(tmp_path / "proc-77.jsonl", {"kind": "process", "pid": 77, "how": "exec"},
                  {"kind": "rank", "rank": 1}, {"kind": "op_running", "id": 5, **op, "op": "aten.sin.default"})
    root = fold_records(str(tmp_path / "records.jsonl"))
    result = result_of(root, "s.py")
    merge_processes(result, root, str(tmp_path), killed=True)
    assert sorted((e["op"], e["status"], e.get("process")) for e in result.errors) == [
        ("aten.cos.default", "TIMEOUT", None), ("aten.sin.default", "TIMEOUT", "rank 1")]
    assert result.processes[0]["process"] == "rank 1" and result.processes[0]["outcome"] == "killed"


def test_slow_ops_of_a_run_that_was_not_stopped_by_time_are_not_timeouts(tmp_path):
    write_records(tmp_path / "records.jsonl",
                  {"kind": "start", "device": "sim", "backend": "sim", "simulated": True, "versions": {}},
                  {"kind": "op_running", "id": 2, "op": "aten.cos.default", "site": "s.py:3", "dtypes": []},
                  {"kind": "end", "outcome": "raised", "exception": {"type": "E", "message": "m", "site": None}})
    root = fold_records(str(tmp_path / "records.jsonl"))
    result = result_of(root, "s.py")
    merge_processes(result, root, str(tmp_path), killed=False)
    assert result.errors == []
