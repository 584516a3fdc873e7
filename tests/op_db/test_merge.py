"""Merging shard databases from a CI matrix."""

import hashlib

import pytest

from op_db.errors import InputError
from op_db.merge import merge_stores, run_key, strip_shard
from op_db.sample import sample_results, write_sample_run
from op_db.store import Store, open_for_reading


def shard_dbs(tmp_path, shards=2, **run):
    results = sample_results()
    paths = []
    for i in range(shards):
        path = tmp_path / f"shard-{i}.db"
        with Store.open(path) as store:
            run_id = write_sample_run(
                store, results[i::shards], options={"shard": f"{i}/{shards}", "dtypes": "float32"},
                command=f"neuron-check ops --device sim --shard {i}/{shards}", **run)
            store.set_coverage(run_id, [("aten.add.Tensor", "direct"), (f"aten.op{i}.default", "missing")])
        paths.append(path)
    return paths


def test_two_shards_merge_into_one_run_equal_to_an_unsharded_run(tmp_path):
    paths = shard_dbs(tmp_path)
    summary = merge_stores(paths, tmp_path / "out.db")
    assert [(s["shards"], s["results"], s["duplicate_items"]) for s in summary] == [(2, 12, 0)]
    with Store.open(tmp_path / "whole.db") as whole:
        whole_id = write_sample_run(whole)
        expected = whole.results(whole_id)
    with open_for_reading(tmp_path / "out.db") as out:
        (run,) = out.runs()
        assert out.results(run["id"]) == expected
        assert run["simulated"] is True and run["status"] == "finished"
        assert run["options"]["shards"] == ["0/2", "1/2"]
        assert "shard" not in run["options"]
        assert len(out.coverage(run["id"])) == 3


def test_runs_of_different_devices_stay_apart(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = shard_dbs(tmp_path / "a", shards=1)
    b = shard_dbs(tmp_path / "b", shards=1, backend="neuron", device="neuron", simulated=False)
    merge_stores(a + b, tmp_path / "out.db")
    with open_for_reading(tmp_path / "out.db") as out:
        assert sorted(r["device"] for r in out.runs()) == ["neuron", "sim"]


def test_run_group_overrides_the_derived_key():
    one = {"backend": "sim", "device": "sim", "command": "x", "options": {"run_group": "ci-42", "shard": "0/2"}}
    two = {"backend": "sim", "device": "sim", "command": "y", "options": {"run_group": "ci-42", "shard": "1/2"}}
    assert run_key(one) == run_key(two) == ("run_group", "ci-42")
    plain = {"backend": "sim", "device": "sim", "command": "neuron-check ops --shard=1/2 --ops add", "options": {}}
    other = dict(plain, command="neuron-check ops --shard 0/2 --ops add")
    assert run_key(plain) == run_key(other)
    assert run_key(plain) != run_key(dict(plain, command="neuron-check ops --ops mul"))


@pytest.mark.parametrize("command, expected", [
    ("neuron-check ops --shard 1/4 --device sim", "neuron-check ops --device sim"),
    ("neuron-check ops --shard=1/4", "neuron-check ops"),
    (None, ""),
])
def test_strip_shard(command, expected):
    assert strip_shard(command) == expected


def test_a_corrupt_input_stops_the_merge_before_the_output_changes(tmp_path):
    (good,) = shard_dbs(tmp_path, shards=1)
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"garbage" * 100)
    out = tmp_path / "out.db"
    with pytest.raises(InputError):
        merge_stores([good, bad], out)
    assert not out.exists()
    assert hashlib.sha256(bad.read_bytes()).digest() == hashlib.sha256(b"garbage" * 100).digest()


def test_output_may_not_be_an_input(tmp_path):
    (good,) = shard_dbs(tmp_path, shards=1)
    with pytest.raises(InputError, match="also an input"):
        merge_stores([good], good)
