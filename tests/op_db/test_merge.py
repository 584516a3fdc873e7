"""Merging shard databases from a CI matrix."""

import hashlib

import pytest

from op_db.errors import InputError
from op_db.merge import group_runs, merge_stores, run_key
from op_db.sample import sample_results, write_sample_run
from op_db.store import Store, open_for_reading


def shard_dbs(tmp_path, shards=2, **run):
    results = sample_results()
    paths = []
    for i in range(shards):
        path = tmp_path / f"shard-{i}.db"
        with Store.open(path) as store:
            run_id = write_sample_run(
                store, results[i::shards], options={"shard": f"{i + 1}/{shards}", "dtypes": "float32"},
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
        assert run["options"]["shards"] == ["1/2", "2/2"]
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
    one = {"backend": "sim", "device": "sim", "command": "x", "options": {"run_group": "ci-42", "shard": "1/2"}}
    two = {"backend": "sim", "device": "sim", "command": "y", "options": {"run_group": "ci-42", "shard": "2/2"}}
    assert run_key(one) == run_key(two) == ("run_group", "ci-42")


def shard_run(shard, command=None, **options):
    options = {"suite": "opinfo", "ops": ["add"], "dtypes": ["float32"], "jobs": 1, "shard": shard, **options}
    return {"backend": "sim", "device": "sim", "command": command or f"neuron-check ops --shard {shard}",
            "options": options}


def test_the_derived_key_ignores_what_differs_per_shard():
    # --db, --junit and the spelling of the command line are not options of the run; --jobs changes no result.
    one = shard_run("1/2", "neuron-check ops --ops add --shard 1/2 --db shard-1.db --junit s1.xml -j 4", jobs=4)
    two = shard_run("2/2", "neuron-check ops --shard=2/2 --db=shard-2.db --ops=add")
    assert run_key(one) == run_key(two)


@pytest.mark.parametrize("change", [
    {"options": {"ops": ["mul"]}}, {"options": {"dtypes": ["bfloat16"]}}, {"options": {"seed": 1}},
    {"options": {"shard": "1/3"}}, {"device": "neuron"}, {"torch_version": "2.14.0"}, {"git_revision": "abc"},
], ids=lambda change: next(iter(change.get("options", change))))
def test_the_derived_key_separates_runs_that_ran_something_else(change):
    base = shard_run("1/2")
    other = {**base, **{k: v for k, v in change.items() if k != "options"}}
    other["options"] = {**base["options"], **change.get("options", {})}
    assert run_key(base) != run_key(other)


def test_unsharded_runs_and_a_repeated_shard_stay_runs_of_their_own():
    parts = [("a.db", shard_run("1/2"), [], []), ("b.db", shard_run("2/2"), [], []),
             ("c.db", shard_run("1/2"), [], []),  # the same command on another day
             ("d.db", shard_run(None), [], []), ("e.db", shard_run(None), [], [])]
    groups = group_runs(parts)
    assert [[path for path, *_ in group] for group in groups] == [["a.db", "b.db"], ["c.db"], ["d.db"], ["e.db"]]


def test_a_missing_shard_makes_the_merged_run_incomplete(tmp_path):
    paths = shard_dbs(tmp_path, shards=3)
    (summary,) = merge_stores(paths[:2], tmp_path / "out.db")
    assert summary["status"] == "incomplete"


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
