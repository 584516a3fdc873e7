"""The 2-D mesh ways (FSDP2+TP, PP+FSDP) need a world of 4 ranks: at the default world of 2 they
are planned and SKIP with the reason; at world 4 on sim they pass fault-free, and a bfloat16
reduce-scatter fault (FSDP2's gradients) makes exactly the bfloat16 items MISMATCH."""

from __future__ import annotations

import pytest

from op_db.records import Status, WorkItem

pytest.importorskip("torch")

from conformance.dist import pp_fsdp  # noqa: E402
from conformance.dist.plan import DistOptions, plan  # noqa: E402
from tests.conformance.test_dist import run  # noqa: E402

MESH_WAYS = ("fsdp2_tp", "pp_fsdp")


def item(way, dtype="float32", variant="train2"):
    return WorkItem("dist", f"parity.{way}", variant, dtype, "eager")


def test_the_default_plan_holds_the_2d_ways_and_a_world_of_2_skips_them_with_the_reason(tmp_path):
    chosen = [item(way) for way in MESH_WAYS]
    assert set(chosen) <= set(plan(DistOptions(parts=("parity",), dtypes=("float32",))))
    results, _ = run(chosen, tmp_path)
    assert {i: r.status for i, r in results.items()} == dict.fromkeys(chosen, Status.SKIP)
    assert all("needs an even world of 4 ranks or more" in r.message for r in results.values())


@pytest.mark.parametrize("world, variant, words", [
    (4, "train2", None), (8, "train2.mb2", None),
    (3, "train2", "needs an even world of 4 ranks or more"),
    (6, "train2", "a batch of 8 does not split over 3 pipelines"),
    # Each pipeline's share of the batch (8 / pipelines rows) is what the microbatches split.
    (8, "train2", "4 microbatches do not split a batch of 2 evenly"),
    (4, "train2.mb3", "3 microbatches do not split a batch of 4 evenly"),
])
def test_pp_fsdp_skips_worlds_and_microbatch_counts_that_do_not_split(world, variant, words):
    reason = pp_fsdp.not_applicable(item("pp_fsdp", variant=variant), world)
    assert reason is None if words is None else words in reason


@pytest.mark.slow
def test_world_of_4_passes_fault_free_and_a_bf16_reduce_scatter_fault_is_mismatch(tmp_path):
    # One world of 4 (its start is most of the cost): float32 items are the fault-free run.
    profile = {"collective_faults": [{"op": "reduce_scatter_tensor", "kind": "scale", "value": 1.5,
                                      "dtype": "bfloat16"}]}
    chosen = [item(way, dtype) for way in MESH_WAYS for dtype in ("float32", "bfloat16")]
    results, _ = run(chosen, tmp_path, profile, world=4)
    assert {i: results[i].status for i in chosen} == {
        i: Status.PASS if i.dtype == "float32" else Status.MISMATCH for i in chosen}
    passed = results[item("pp_fsdp")]
    assert passed.extra["ranks"] == {str(r): "PASS" for r in range(4)}
    assert len(passed.extra["losses"]) == 2
    assert all(results[i].divergence for i in chosen if i.dtype == "bfloat16")


@pytest.mark.slow
def test_world_of_4_without_reduce_scatter_is_unsupported_naming_it(tmp_path):
    profile = {"collective_faults": [{"op": "reduce_scatter_tensor", "kind": "unsupported"}]}
    results, _ = run([item("pp_fsdp")], tmp_path, profile, world=4)
    (result,) = results.values()
    assert result.status is Status.UNSUPPORTED
    assert result.extra["missing_collective"] == "reduce_scatter_tensor"
    assert "pipeline parallel with FSDP2 (PP+FSDP) needs the collective reduce_scatter_tensor, which this process " \
           "group lacks: RuntimeError: Backend sim does not support reduce_scatter_tensor" in result.message
