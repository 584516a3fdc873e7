"""The JSON cache of slow-to-derive facts: built once, read back under the same stamp, rebuilt
under another, and never an error when the cache cannot be written."""

from __future__ import annotations

import pytest

from conformance.models.diffusers import zoo
from op_db import json_cache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURON_CHECK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def counting(value):
    calls = []

    def build():
        calls.append(1)
        return value

    return build, calls


def test_a_value_is_built_once_per_stamp_and_rebuilt_under_another(cache):
    build, calls = counting({"a": [1, 2]})
    assert json_cache.load_or_build("facts", "v1", build) == {"a": [1, 2]}
    assert json_cache.load_or_build("facts", "v1", build) == {"a": [1, 2]}
    assert len(calls) == 1
    json_cache.load_or_build("facts", "v2", build)
    assert len(calls) == 2


def test_an_unwritable_cache_only_costs_a_rebuild(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("NEURON_CHECK_CACHE", str(tmp_path / "file" / "cache"))
    build, calls = counting([3])
    assert json_cache.load_or_build("facts", "v1", build) == [3]
    assert json_cache.load_or_build("facts", "v1", build) == [3]
    assert len(calls) == 2


def test_a_corrupt_cache_file_is_rebuilt(cache):
    build, calls = counting([1])
    json_cache.load_or_build("facts", "v1", build)
    (path,) = cache.glob("facts-*.json")
    path.write_text("{truncated")
    assert json_cache.load_or_build("facts", "v1", build) == [1] and len(calls) == 2


def test_the_file_stamp_changes_with_the_text(tmp_path):
    rules = tmp_path / "rules.py"
    rules.write_text("FAMILY = 'image'\n")
    before = json_cache.file_stamp(str(rules))
    rules.write_text("FAMILY = 'video'\n")
    assert json_cache.file_stamp(str(rules)) != before
    assert json_cache.file_stamp(str(tmp_path / "gone.py")) == "missing"


def test_the_diffusers_catalogue_is_derived_once_then_read_from_the_cache(cache, monkeypatch):
    pytest.importorskip("diffusers")
    rows = [["UNet2DModel", "diffusers.models.unets.unet_2d", "image", "image"]]
    build, calls = counting(rows)
    monkeypatch.setattr(zoo, "_catalogue_rows", build)
    for _ in range(2):
        zoo.catalogue.cache_clear()
        entry = zoo.catalogue()["diffusers:UNet2DModel"]
    zoo.catalogue.cache_clear()
    assert (entry.family, entry.module) == ("image", "diffusers.models.unets.unet_2d") and len(calls) == 1
    # Other classification rules (here: another stamp) derive it again.
    monkeypatch.setattr(zoo, "_catalogue_stamp", lambda: "edited-rules")
    zoo.catalogue()
    zoo.catalogue.cache_clear()
    assert len(calls) == 2
