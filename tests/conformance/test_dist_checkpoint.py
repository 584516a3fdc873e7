"""Distributed checkpoint parity on sim: fault-free the FSDP2 save loads bitwise into a world-1
model and a tensor-parallel layout; one shard whose bytes changed on disk is caught (MISMATCH
naming the tensor). One world runs the three items (a world's start is most of the cost)."""

from __future__ import annotations

import pytest

from op_db.records import Status, WorkItem

pytest.importorskip("torch")

from tests.conformance.test_dist import run  # noqa: E402


def item(dtype="float32", variant="train2"):
    return WorkItem("dist", "parity.dcp", variant, dtype, "eager")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    found, _ = run([item("float32"), item("bfloat16"), item(variant="train2.corrupt")],
                   tmp_path_factory.mktemp("dcp"))
    return found


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fault_free_checkpoint_loads_exactly_into_world_one_and_tensor_parallel(results, dtype):
    result = results[item(dtype)]
    assert result.status is Status.PASS, result.message
    assert result.extra["ranks"] == {"0": "PASS", "1": "PASS"}
    assert len(result.extra["losses"]) == 2 and result.extra["corrupted"] is None


def test_a_corrupted_shard_file_is_mismatch_naming_the_tensor(results):
    result = results[item(variant="train2.corrupt")]
    assert result.status is Status.MISMATCH
    assert result.divergence == "1.linear.weight (world-1 load)"
    assert "world-1 load of 1.linear.weight" in result.message
    # Rank 1 damaged its own file; rank 0's loads read it too and fail alike.
    assert result.extra["ranks"] == {"0": "MISMATCH", "1": "MISMATCH"}
