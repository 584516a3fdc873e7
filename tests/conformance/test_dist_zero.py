"""Tensor parallel, ZeRO and activation checkpointing parity on sim: fault-free every way passes
and judges every parameter; a corrupted reduce-scatter or broadcast on one rank is MISMATCH for
the way that uses it only; a collective the process group lacks is UNSUPPORTED naming it."""

from __future__ import annotations

import pytest

from op_db.errors import InputError
from op_db.records import Status, WorkItem

pytest.importorskip("torch")

from conformance.dist import mlp_stack  # noqa: E402
from conformance.dist.plan import DistOptions, plan  # noqa: E402
from tests.conformance.test_dist import run  # noqa: E402

TP_WAYS = ("tp", "tp_sp")
ZERO_WAYS = ("zero1", "zero2", "zero3", "fsdp2_mp", "fsdp2_offload", "fsdp2_ac")


def item(way, dtype="float32"):
    return WorkItem("dist", f"parity.{way}", "train2", dtype, "eager")


def test_fault_free_ways_pass_and_judge_every_parameter(tmp_path):
    chosen = [item(way) for way in TP_WAYS + ZERO_WAYS] + [item(w, "bfloat16") for w in ("tp_sp", "zero1", "fsdp2_mp")]
    results, _ = run(chosen, tmp_path)
    assert {i: r.status for i, r in results.items()} == dict.fromkeys(chosen, Status.PASS)
    names = sorted(name for name, _ in mlp_stack.build(0, mlp_stack.torch.float32).named_parameters())
    assert {tuple(r.extra["parameters"]) for r in results.values()} == {tuple(names)}
    # Every block ran forward twice a step: once, and once more recomputed in backward.
    assert results[item("fsdp2_ac")].extra["block_forwards"] == 2 * mlp_stack.STEPS * mlp_stack.BLOCKS


def test_corrupted_fp32_reduce_scatter_is_mismatch_where_used_and_a_missing_broadcast_unsupported(tmp_path):
    # Rank 1's float32 reduce-scatter, scaled: FSDP2 reduces float32 gradients, and so does the
    # bf16 mixed-precision run (reduce_dtype float32); a bf16 FSDP2 run reduces in bf16. ZeRO-1
    # needs broadcast (each partition's updated parameters), which this group refuses.
    profile = {"collective_faults": [
        {"op": "reduce_scatter_tensor", "kind": "scale", "value": 1.5, "rank": 1, "dtype": "float32"},
        {"op": "broadcast", "kind": "unsupported"}]}
    chosen = [item("zero2"), item("zero2", "bfloat16"), item("fsdp2_mp", "bfloat16"), item("zero1")]
    results, _ = run(chosen, tmp_path, profile, timeout_s=30.0)
    assert [results[i].status for i in chosen] == [Status.MISMATCH, Status.PASS, Status.MISMATCH, Status.UNSUPPORTED]
    assert results[chosen[0]].divergence
    assert results[item("zero1")].extra["missing_collective"] == "broadcast"
    assert results[item("zero1")].message.startswith(
        "rank 0: ZeroRedundancyOptimizer (ZeRO-1) needs the collective broadcast, which this process group lacks: "
        "RuntimeError: Backend sim does not support broadcast")


def test_corrupted_broadcast_is_mismatch_for_zero1_and_a_missing_reduce_scatter_unsupported(tmp_path):
    profile = {"collective_faults": [{"op": "broadcast", "kind": "scale", "value": 1.5, "rank": 1},
                                     {"op": "reduce_scatter_tensor", "kind": "unsupported"}]}
    chosen = [item("zero1"), item("zero2"), item("fsdp2_ac"), item("tp")]
    results, _ = run(chosen, tmp_path, profile, timeout_s=30.0)
    assert [results[i].status for i in chosen] == [Status.MISMATCH, Status.UNSUPPORTED, Status.UNSUPPORTED,
                                                   Status.MISMATCH]  # tp's weights are scattered from rank 0
    assert results[item("zero1")].extra["ranks"] == {"0": "MISMATCH", "1": "MISMATCH"}  # step 2 spreads it
    assert {results[i].extra["missing_collective"] for i in chosen[1:3]} == {"reduce_scatter_tensor"}
    assert results[item("zero2")].message.startswith(
        "rank 0: FSDP2 without resharding (ZeRO-2) needs the collective reduce_scatter_tensor, which this process "
        "group lacks: RuntimeError: Backend sim does not support reduce_scatter_tensor")


@pytest.mark.parametrize("world, data_parallel, words", [
    (1, True, "needs a world of 2 ranks or more"),
    (3, True, "a batch of 8 does not split over 3 ranks"),
    (3, False, "do not split over 3 ranks"),
    (4, False, None), (2, True, None),
])
def test_worlds_the_model_cannot_split_over_are_skip(world, data_parallel, words):
    reason = mlp_stack.not_applicable(world, data_parallel)
    assert reason is None if words is None else words in reason


def test_ways_selects_parity_ways_by_glob():
    chosen = plan(DistOptions(parts=("parity",), dtypes=("float32",), ways=("zero*", "tp")))
    assert [i.subject for i in chosen] == ["parity.tp", "parity.zero1", "parity.zero2", "parity.zero3"]
    with pytest.raises(InputError, match="no parity way matches 'zero9'"):
        plan(DistOptions(parts=("parity",), ways=("zero9",)))


def test_a_hung_reduce_scatter_is_timeout_of_that_item_and_the_run_goes_on(tmp_path):
    # ZeRO-2's gradients never come back from rank 0's reduce-scatter: TIMEOUT for that item
    # only; ZeRO-1 (all-reduce and broadcast) runs after it in a fresh world and passes.
    profile = {"collective_faults": [{"op": "reduce_scatter_tensor", "kind": "hang", "rank": 0}]}
    results, executor = run([item("zero2"), item("zero1")], tmp_path, profile, timeout_s=10.0)
    assert [results[i].status for i in (item("zero2"), item("zero1"))] == [Status.TIMEOUT, Status.PASS]
    assert "rank(s) 0" in results[item("zero2")].message
    assert len(executor.pids) == 4


def test_a_corrupted_all_gather_is_mismatch_for_the_ways_that_gather_parameters(tmp_path):
    # Rank 1's float32 all-gathers scaled: ZeRO-3 and offload all-gather the sharded parameters
    # for compute, sequence parallel the sequence before each MLP; ZeRO-1 all-reduces and passes.
    profile = {"collective_faults": [{"op": "all_gather_into_tensor", "kind": "scale", "value": 1.5, "rank": 1,
                                      "dtype": "float32"}]}
    chosen = [item("zero3"), item("fsdp2_offload"), item("tp_sp"), item("zero1")]
    results, _ = run(chosen, tmp_path, profile, timeout_s=30.0)
    assert [results[i].status for i in chosen] == [Status.MISMATCH] * 3 + [Status.PASS]
    assert all(results[i].divergence for i in chosen[:3])
