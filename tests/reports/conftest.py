"""Fixtures for the report tests: sample runs written straight into a store."""

import pytest

from op_db.sample import result, sample_results, write_sample_run
from op_db.store import Store

HOSTILE = "<script>document.title='pwned'</script> & \"quoted\" | pipe"


@pytest.fixture
def hostile():
    return HOSTILE


@pytest.fixture
def hostile_results():
    """The sample set plus an item whose text tries to inject markup."""
    return [*sample_results(), result("index_put", "float32", "ERROR", message=HOSTILE,
                                      first_failure=HOSTILE, failing_op="aten.index_put.default")]


@pytest.fixture
def sample_db(tmp_path, hostile_results):
    path = tmp_path / "results.db"
    with Store.open(path) as store:
        write_sample_run(store, hostile_results)
    return path
