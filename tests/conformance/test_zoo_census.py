"""The zoo census: every failure gets one cause of the closed set, a hung build is a TIMEOUT and
the census still completes, and the aten overloads are counted per task."""

from __future__ import annotations

import time

import pytest

from conformance.models import causes, census
from conformance.models.documented import MissingInputBuilder


def _raise(exc):
    def fail(*args, **kwargs):
        raise exc
    return fail


def _offline_error():
    return OSError("We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them "
                   "in the cached files (offline mode).")


@pytest.mark.parametrize(("target", "exc", "cause", "detail"), [
    ("build_model", ModuleNotFoundError("No module named 'fancylib'", name="fancylib"), causes.OPTIONAL_DEPENDENCY,
     "fancylib"),
    ("build_model", ImportError("FancyBackbone requires the fancylib library but it was not found"),
     causes.OPTIONAL_DEPENDENCY, "fancylib"),
    ("build_model", _offline_error(), causes.DOWNLOAD, None),
    ("build_config", ValueError("heads must divide hidden size"), causes.UNSHRINKABLE, None),
    ("make_inputs", MissingInputBuilder("FooModel.forward takes none of input_ids"), causes.NO_INPUT_BUILDER, None),
    ("make_inputs", RuntimeError("shape mismatch in the forward"), causes.MODEL_BUG, None),
])
def test_injected_failure_gets_its_cause(monkeypatch, target, exc, cause, detail):
    from conformance.models import inputs, zoo

    module = inputs if target == "make_inputs" else zoo
    monkeypatch.setattr(module, target, _raise(exc))
    status = census.check_pair(zoo.pairs()["bert:token-classification"])
    assert not status.ok
    assert status.cause == cause
    if detail is not None:
        assert status.detail == detail and status.status == f"needs optional dependency {detail}"
    else:
        assert type(exc).__name__ in status.detail


def test_a_healthy_pair_runs_and_records_its_aten_overloads():
    from conformance.models import zoo

    status = census.check_pair(zoo.pairs()["bert:question-answering"])
    assert status.ok, status.status
    assert "aten.addmm.default" in status.ops and all(op.startswith("aten.") for op in status.ops)


def hang_on_bert(entry):
    """A checker for spawned workers: bert's pair hangs, every other fails with an import error."""
    if entry.model_type == "bert":
        time.sleep(600)
    failure = causes.classify(ImportError("needs the widgetlib library", name="widgetlib"), "model")
    return census.PairStatus(entry.subject, entry.model_type, entry.task, False, failure.cause, failure.detail)


def test_a_hung_build_is_a_timeout_and_the_census_completes():
    subjects = ["bert:token-classification", "gpt2", "bert:question-answering", "albert:token-classification"]
    start = time.monotonic()
    found = census.census(subjects, jobs=1, batch=4, timeout_s=5, checker=hang_on_bert)
    assert time.monotonic() - start < 120
    assert set(found) == set(subjects)
    timed_out = [s for s, status in found.items() if status.cause == causes.TIMEOUT]
    assert len(timed_out) == 2 and all(s.startswith("bert:") for s in timed_out), {s: st.status for s, st in found.items()}
    assert found["gpt2"].status == found["albert:token-classification"].status == "needs optional dependency widgetlib"


def test_summary_counts_types_pairs_causes_and_aten_overloads():
    from conformance.models import zoo
    from conformance.models.census_report import render_listing, summarise

    entries = [zoo.pairs()[s] for s in ("bert", "bert:base", "gpt2")]
    statuses = {
        "bert": census.PairStatus("bert", "bert", entries[0].task, True, ops=("aten.addmm.default", "aten.gelu.default")),
        "bert:base": census.PairStatus("bert:base", "bert", "base", True, ops=("aten.addmm.default",)),
        "gpt2": census.PairStatus("gpt2", "gpt2", "causal-lm", False, causes.OPTIONAL_DEPENDENCY, "fancylib"),
    }
    summary = summarise(entries, statuses)
    assert (summary.types, summary.types_ok, summary.pairs, summary.pairs_ok) == (2, 1, 3, 2)
    assert summary.aten_ops == 2 and summary.per_task["base"]["aten_ops"] == 1
    assert summary.causes[causes.OPTIONAL_DEPENDENCY] == 1 and set(summary.causes) == set(causes.CAUSES)
    assert summary.dependencies == {"fancylib": 1}
    text = render_listing([{**e.to_dict(), "build": statuses[e.subject].status,
                            "aten_ops": len(statuses[e.subject].ops)} for e in entries], summary, str)
    assert "types: 1/2 run a forward" in text and "distinct aten overloads exercised by the zoo: 2" in text
