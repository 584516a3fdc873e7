"""Shards made as the README shows merge into one run equal, item by item, to the unsharded run."""

import json

import pytest

from op_db.store import open_for_reading

# Three ops x two dtypes, with faults so the statuses differ from item to item; 2 of the
# items fall in shard 1/2 (sub), 4 in shard 2/2.
PROFILE = {
    "name": "mixed",
    "unsupported_ops": ["aten.add.Tensor"],
    "faults": [{"op": "aten.mul.Tensor", "dtype": "bfloat16", "kind": "scale", "value": 1.05},
               {"op": "aten.sub.Tensor", "kind": "raise", "value": "sub is broken here"}],
}
SELECTION = ["--device", "sim", "--ops", "add,mul,sub", "--dtype", "fp32,bf16", "--max-samples", "2"]


def statuses(db):
    with open_for_reading(db) as store:
        (run,) = store.runs()
        return run, {r.item: r.status.value for r in store.results(run["id"])}


@pytest.mark.slow
def test_sharded_runs_merge_into_the_unsharded_run(tmp_path, db_files):
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps(PROFILE))
    common = [*SELECTION, "--sim-profile", str(profile)]
    whole = db_files.run_cli("ops", *common, "--db", "whole.db", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    # Each shard writes its own database and JUnit file, with its own worker count and option spelling.
    for k, extra in ((1, ["--shard", "1/2", "--jobs", "1"]), (2, ["--shard=2/2", "-j", "2"])):
        shard = db_files.run_cli("ops", *extra, *common, f"--db=shard-{k}.db", "--junit", f"shard-{k}.xml",
                                 cwd=tmp_path)
        assert shard.returncode == 0, shard.stderr
    merged = db_files.run_cli("merge", "shard-1.db", "shard-2.db", "-o", "all.db", cwd=tmp_path)
    assert merged.returncode == 0, merged.stderr
    assert merged.stdout.strip() == "run 1: 6 results from 2 shards"

    _, expected = statuses(tmp_path / "whole.db")
    run, got = statuses(tmp_path / "all.db")
    shard_sizes = [len(statuses(tmp_path / f"shard-{k}.db")[1]) for k in (1, 2)]
    assert all(shard_sizes) and sum(shard_sizes) == 6  # both shards did part of the work
    assert got == expected
    assert sorted(set(expected.values())) == ["ERROR", "MISMATCH", "PASS", "UNSUPPORTED"]
    assert run["status"] == "finished" and run["options"]["shards"] == ["1/2", "2/2"]
