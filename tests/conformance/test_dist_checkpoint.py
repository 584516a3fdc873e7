"""Distributed checkpoint parity on sim: fault-free the FSDP2 save loads bitwise into a world-1
model and a tensor-parallel layout; one shard whose bytes changed on disk is caught (MISMATCH
naming the tensor), as is a collective fault in the training before the save."""

from __future__ import annotations

import pytest

from op_db.records import Status, WorkItem

pytest.importorskip("torch")

from tests.conformance.test_dist import run  # noqa: E402


def item(dtype="float32", variant="train2"):
    return WorkItem("dist", "parity.dcp", variant, dtype, "eager")


def test_fault_free_checkpoint_loads_exactly_into_world_one_and_tensor_parallel(tmp_path):
    chosen = [item("float32"), item("bfloat16")]
    results, _ = run(chosen, tmp_path)
    for one in chosen:
        result = results[one]
        assert result.status is Status.PASS, result.message
        assert result.extra["ranks"] == {"0": "PASS", "1": "PASS"}
        assert len(result.extra["losses"]) == 2


def test_a_corrupted_shard_file_is_mismatch_naming_the_tensor(tmp_path):
    results, _ = run([item(variant="train2.corrupt")], tmp_path)
    (result,) = results.values()
    assert result.status is Status.MISMATCH
    assert result.divergence == "1.linear.weight (world-1 load)"
    assert result.extra["ranks"] == {"0": "MISMATCH", "1": "MISMATCH"}
