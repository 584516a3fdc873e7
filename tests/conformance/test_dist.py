"""The dist suite on sim: fault-free collectives pass; injected collective faults are caught
with the exact status; a hung rank is TIMEOUT and leaves no process behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from op_db.errors import InputError
from op_db.records import Status, WorkItem

torch = pytest.importorskip("torch")

from conformance.engine.config import RunConfig  # noqa: E402
from conformance.dist.plan import DistOptions, plan  # noqa: E402
from conformance.dist.world import WorldExecutor, WorldSpec  # noqa: E402


class RecordingExecutor(WorldExecutor):
    """Remembers every rank process it started, so a test can check none is left."""

    def __init__(self, spec):
        super().__init__(spec)
        self.pids: list[int] = []

    def start_world(self, mp, config):
        world = super().start_world(mp, config)
        self.pids += [p.pid for p in world.processes]
        return world


def run(items, tmp_path, profile=None, timeout_s=60.0, options=None, world=2):
    sim_profile = None
    if profile is not None:
        sim_profile = str(tmp_path / "profile.json")
        (tmp_path / "profile.json").write_text(json.dumps(profile))
    config = RunConfig(backend="sim", device="sim", timeout_s=timeout_s, sim_profile=sim_profile,
                       suite_options=options or DistOptions(world_size=world))
    executor = RecordingExecutor(WorldSpec(world, ("sim",) * world))
    results = []
    executor.execute(items, config, results.append)
    return {r.item: r for r in results}, executor


def collective_items(dtypes=("float32", "bfloat16")):
    return plan(DistOptions(dtypes=dtypes, parts=("collectives",)))


def test_fault_free_collectives_pass_in_fp32_and_bf16(tmp_path):
    items = collective_items()
    results, _ = run(items, tmp_path)
    assert len(results) == len(items)
    assert {r.dtype for r in results.values()} == {"float32", "bfloat16", "none"}
    failing = {item: r.status for item, r in results.items() if r.status is not Status.PASS}
    assert failing == {}


def test_scaled_bf16_all_reduce_is_caught_exactly(tmp_path):
    parity = [WorkItem("dist", f"parity.{way}", "train2", dtype, "eager")
              for way in ("ddp", "fsdp2") for dtype in ("float32", "bfloat16")]
    profile = {"collective_faults": [{"op": "all_reduce", "kind": "scale", "value": 1.5, "dtype": "bfloat16"}]}
    results, _ = run(collective_items() + parity, tmp_path, profile)
    mismatched = {item for item, r in results.items() if r.status is Status.MISMATCH}
    # An empty tensor has nothing to scale; every other bf16 all_reduce item, and DDP's bf16
    # step (its gradients are all-reduced), must be caught. FSDP2 reduce-scatters instead.
    expected = {item for item in results if item.subject.startswith("all_reduce.") and item.dtype == "bfloat16"
                and item.variant != "empty"} | {WorkItem("dist", "parity.ddp", "train2", "bfloat16", "eager")}
    assert mismatched == expected
    assert all(r.status is Status.PASS for item, r in results.items() if item not in expected)
    assert results[WorkItem("dist", "parity.ddp", "train2", "bfloat16", "eager")].divergence


@pytest.mark.parametrize("scale", [4.0, 0.25])
def test_lying_event_timers_are_caught_by_both_timed_stream_checks(tmp_path, scale):
    items = [WorkItem("dist", f"streams.{check}", "ordering", "none", "eager")
             for check in ("event_timing", "cross_stream", "order")]
    results, _ = run(items, tmp_path, {"event_timing": {"scale": scale}})
    assert {item.subject: r.status for item, r in results.items()} == {
        "streams.event_timing": Status.MISMATCH, "streams.cross_stream": Status.MISMATCH,
        "streams.order": Status.PASS}


def test_dtensor_opinfo_passes_fault_free_and_a_sim_fault_is_mismatch(tmp_path):
    # One world: the aten fault scales bf16 mul only, so the float32 items are the fault-free run.
    options = DistOptions(parts=("dtensor",), ops=("mul", "nonzero"), dtypes=("float32", "bfloat16"), max_samples=2)
    items = plan(options)
    mul = {dtype: [i for i in items if i.subject == "dtensor.mul" and i.dtype == dtype] for dtype in options.dtypes}
    assert {item.variant for item in mul["float32"]} == {"shard0", "replicate", "partial"}
    profile = {"faults": [{"op": "aten.mul.Tensor", "kind": "scale", "value": 1.5, "dtype": "bfloat16"}]}
    results, _ = run(items, tmp_path, profile, options=options)
    assert {item: results[item].status for item in mul["float32"]} == dict.fromkeys(mul["float32"], Status.PASS)
    assert {item: results[item].status for item in mul["bfloat16"]} == dict.fromkeys(mul["bfloat16"], Status.MISMATCH)
    shard0, partial = (WorkItem("dist", "dtensor.mul", v, "float32", "eager") for v in ("shard0", "partial"))
    assert results[shard0].extra["output_placements"] == ["R", "S(0)"]  # a 0-dim sample stays replicated
    assert results[partial].extra["output_placements"] == ["P(sum)"]
    # DTensor has no sharding rule for nonzero: its gap, named as such, not the backend's.
    nonzero = results[WorkItem("dist", "dtensor.nonzero", "replicate", "float32", "eager")]
    assert nonzero.status is Status.UNSUPPORTED
    assert nonzero.extra["sharding_propagation"] == "failed" and "sharding propagation failed" in nonzero.message


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_hanging_all_gather_is_timeout_and_leaves_no_process(tmp_path):
    items = [WorkItem("dist", "all_gather", "contig", "float32", "eager"),
             WorkItem("dist", "broadcast", "contig", "float32", "eager"),
             WorkItem("dist", "all_reduce.sum", "odd", "float32", "eager")]
    profile = {"collective_faults": [{"op": "all_gather", "kind": "hang", "rank": 1}]}
    results, executor = run(items, tmp_path, profile, timeout_s=5.0)
    assert results[items[0]].status is Status.TIMEOUT
    assert "rank(s) 1" in results[items[0]].message
    assert [results[i].status for i in items[1:]] == [Status.PASS, Status.PASS]
    assert len(executor.pids) == 4  # the first world, and the fresh one after the hang
    assert not [pid for pid in executor.pids if _alive(pid)]


def test_crashing_rank_is_crash_and_a_fresh_world_goes_on(tmp_path):
    items = [WorkItem("dist", "broadcast", "contig", "float32", "eager"),
             WorkItem("dist", "all_gather", "odd", "float32", "eager")]
    profile = {"collective_faults": [{"op": "broadcast", "kind": "crash", "rank": 0}]}
    results, executor = run(items, tmp_path, profile, timeout_s=20.0)
    assert results[items[0]].status is Status.CRASH
    assert "SIGSEGV" in results[items[0]].message
    assert results[items[1]].status is Status.PASS
    assert not [pid for pid in executor.pids if _alive(pid)]


def test_profile_collective_faults_validate(sim_device):
    profile = sim_device.load_profile({"collective_faults": [{"op": "all_reduce", "kind": "nan", "rank": 1}]})
    assert profile.collective_faults[0].applies("all_reduce", "float32", 1)
    assert not profile.collective_faults[0].applies("all_reduce", "float32", 0)
    assert sim_device.load_profile(profile.to_dict()) == profile
    with pytest.raises(InputError, match="unknown collective 'all_reduse'"):
        sim_device.load_profile({"collective_faults": [{"op": "all_reduse", "kind": "nan"}]})


def _cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "porting_cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


@pytest.mark.parametrize("args, words", [
    (["--world-size", "0"], "--world-size"),
    (["--world-size", "1000"], "more ranks than this host runs"),
])
def test_bad_world_size_is_one_sentence_exit_2(tmp_path, args, words):
    done = _cli("dist", "--device", "sim", "--db", str(tmp_path / "t.db"), *args, cwd=tmp_path)
    assert done.returncode == 2
    assert words in done.stderr and "Traceback" not in done.stderr


def test_cli_run_stores_the_dist_suite_and_report_shows_it(tmp_path):
    db = str(tmp_path / "t.db")
    done = _cli("dist", "--device", "sim", "--db", db, "--parts", "collectives,streams", "--collectives",
                "broadcast", "--dtype", "bf16", "--junit", str(tmp_path / "j.xml"), "--fail-on", "MISMATCH",
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = _cli("report", "--db", db, "--format", "json", cwd=tmp_path)
    data = json.loads(report.stdout)
    assert {r["suite"] for r in data["results"]} == {"dist"}
    statuses = {r["subject"]: r["status"] for r in data["results"]}
    assert statuses["broadcast"] == statuses["streams.order"] == "PASS"
    # sim's C++ device guard has streams and timed events, as a real backend's does.
    assert statuses["streams.synchronize"] == statuses["streams.event_timing"] == "PASS"
    assert statuses["streams.cross_stream"] == statuses["streams.device_module"] == "PASS"
    assert (tmp_path / "j.xml").read_text().count("<testcase") == len(data["results"])


def test_executor_ray_without_ray_is_one_input_error(monkeypatch):
    from types import SimpleNamespace

    from conformance.dist.suite import SUITE

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError, as where it is absent
    config = RunConfig(backend="sim", device="sim", executor="ray", suite_options=DistOptions(world_size=2))
    with pytest.raises(InputError, match=r"^--executor ray needs Ray: pip install 'neuron-check\[ray\]'\.$"):
        SUITE.make_executor(config, SimpleNamespace(name="sim"))
