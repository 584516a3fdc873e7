"""Pipeline-parallel parity on sim: fault-free every schedule passes; a point-to-point fault on
one link is MISMATCH, a process group without send/recv is UNSUPPORTED naming them, and a
microbatch count that does not split the batch is SKIP, never a hang."""

from __future__ import annotations

import pytest

from op_db.errors import InputError
from op_db.records import Status, WorkItem

pytest.importorskip("torch")

from conformance.dist.pipeline import not_applicable  # noqa: E402
from tests.conformance.test_dist import run  # noqa: E402

WAYS = ("pp_gpipe", "pp_1f1b", "pp_interleaved")


def items(ways=WAYS, dtypes=("float32", "bfloat16"), variant="train2"):
    return [WorkItem("dist", f"parity.{way}", variant, dtype, "eager") for way in ways for dtype in dtypes]


def test_fault_free_pipelines_pass_and_cover_every_parameter(tmp_path):
    chosen = items(dtypes=("float32",)) + items(("pp_1f1b",), ("bfloat16",)) + items(("pp_gpipe",), ("float32",), "train2.mb3")
    results, _ = run(chosen, tmp_path)
    statuses = {item.subject + "/" + item.dtype + "/" + item.variant: r.status for item, r in results.items()}
    uneven = results[chosen[-1]]
    assert statuses.pop("parity.pp_gpipe/float32/train2.mb3") is Status.SKIP
    assert "3 microbatches do not split a batch of 8 evenly" in uneven.message
    assert set(statuses.values()) == {Status.PASS}
    # Each rank judges the stages it holds; the last stage's rank holds the head.
    interleaved = results[WorkItem("dist", "parity.pp_interleaved", "train2", "float32", "eager")]
    assert interleaved.extra["ranks"] == {"0": "PASS", "1": "PASS"}
    assert len(interleaved.extra["losses"]) == 2


def test_corrupted_activations_on_one_link_are_mismatch(tmp_path):
    profile = {"collective_faults": [{"op": "recv", "kind": "scale", "value": 1.5, "rank": 1, "peer": 0}]}
    results, _ = run(items(("pp_gpipe", "pp_interleaved"), ("float32",)), tmp_path, profile)
    assert {r.status for r in results.values()} == {Status.MISMATCH}
    assert {r.divergence for r in results.values()} == {"loss"}


def test_a_process_group_without_send_recv_is_unsupported_naming_them(tmp_path):
    profile = {"collective_faults": [{"op": "send", "kind": "unsupported"}, {"op": "recv", "kind": "unsupported"}]}
    results, _ = run(items(("pp_1f1b",), ("float32",)), tmp_path, profile, timeout_s=30.0)
    (result,) = results.values()
    assert result.status is Status.UNSUPPORTED
    assert "pipeline parallel needs point-to-point send (send/recv)" in result.message
    assert "Backend sim does not support send" in result.message


def test_peer_is_only_for_point_to_point(sim_device):
    profile = sim_device.load_profile({"collective_faults": [{"op": "recv", "kind": "nan", "peer": 0}]})
    assert profile.collective_faults[0].applies("recv", "float32", 1, 0)
    assert not profile.collective_faults[0].applies("recv", "float32", 1, 2)
    assert sim_device.load_profile(profile.to_dict()) == profile
    with pytest.raises(InputError, match="names a 'peer', which only a point-to-point op"):
        sim_device.load_profile({"collective_faults": [{"op": "all_reduce", "kind": "nan", "peer": 0}]})


def test_a_hung_recv_is_timeout_of_that_item_and_the_run_goes_on(tmp_path):
    # Rank 1's recv never returns: that pipeline is TIMEOUT (the world is killed), and a fresh
    # world runs the items after it: a ZeRO way (no recv) passes.
    profile = {"collective_faults": [{"op": "recv", "kind": "hang", "rank": 1}]}
    hung, after = items(("pp_gpipe",), ("float32",))[0], WorkItem("dist", "parity.zero3", "train2", "float32", "eager")
    results, executor = run([hung, after], tmp_path, profile, timeout_s=10.0)
    assert results[hung].status is Status.TIMEOUT
    assert "longer than the 10 s limit on rank(s)" in results[hung].message
    assert results[after].status is Status.PASS
    assert len(executor.pids) == 4  # the first world, and the fresh one after the hang


@pytest.mark.parametrize("way, world, variant, words", [
    ("pp_interleaved", 2, "train2.mb3", "3 microbatches do not split a batch of 8 evenly"),
    ("pp_interleaved", 2, "train2.mb2", None),
    # 6 stages fit the 6 pieces, but 4 microbatches do not go round 3 ranks.
    ("pp_interleaved", 3, "train2", "needs the microbatch count (4) to be a multiple of the 3 ranks"),
    ("pp_1f1b", 2, "train2.mb0", "0 microbatches do not split"),
    ("pp_gpipe", 1, "train2", "needs a world of 2 ranks or more"),
    ("pp_gpipe", 8, "train2", "8 stages are more than the model's 6 pieces"),
])
def test_microbatch_counts_and_worlds_a_schedule_cannot_take_are_skip(way, world, variant, words):
    reason = not_applicable(way, WorkItem("dist", f"parity.{way}", variant, "float32", "eager"), world)
    assert reason is None if words is None else words in reason
