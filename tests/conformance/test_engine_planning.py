"""Planning: dtype names, op patterns, variants, the FP8 hand-off and the op index cache."""

import pytest

from conformance import opindex, planning
from conformance.planning import OpsOptions, parse_dtypes
from conformance.suite import options_from_dict, options_to_dict
from conformance.suite import plan as plan_command
from op_db.errors import InputError


def test_dtype_aliases_and_torch_names():
    assert parse_dtypes(["fp32", "torch.bfloat16", "half", "fp32", "int64"]) == ["float32", "bfloat16", "float16", "int64"]
    assert parse_dtypes(None) == ["float32", "bfloat16", "float16"]
    assert parse_dtypes(["fp8", "float8_e5m2"]) == ["fp8", "float8_e5m2"]


def test_unknown_dtype_is_input_error():
    with pytest.raises(InputError, match="unknown dtype"):
        parse_dtypes(["fp33"])


def test_names_and_globs_select_ops_and_exclude_removes_them():
    items = plan_command("ops", OpsOptions(ops=("mul", "nn.functional.relu*"), exclude=("nn.functional.relu6",), dtypes=("float32",)))
    assert {i.subject for i in items} == {"mul", "nn.functional.relu"}


def test_variant_names_are_full_names():
    items = plan_command("ops", OpsOptions(ops=("normal.in_place",), dtypes=("float32",)))
    assert [i.subject for i in items] == ["normal.in_place"]


def test_grad_adds_backward_only_for_differentiable_dtypes():
    items = plan_command("ops", OpsOptions(ops=("add",), dtypes=("float32", "int64"), grad=True))
    assert {(i.variant, i.dtype) for i in items} == {("forward", "float32"), ("backward", "float32"), ("forward", "int64")}


def test_dtypes_the_cpu_lacks_are_not_planned():
    # OpInfo says linalg.inv has no bfloat16 on CPU: no item rather than a sure failure.
    items = plan_command("ops", OpsOptions(ops=("linalg.inv",), dtypes=("float32", "bfloat16")))
    assert [i.dtype for i in items] == ["float32"]


def test_fp8_subjects_go_to_the_fp8_suite():
    items = plan_command("ops", OpsOptions(ops=("mul", "cast"), dtypes=("float32", "fp8")))
    assert {i.suite for i in items} == {"opinfo", "fp8"}
    assert {i.subject for i in items if i.suite == "fp8"} == {"cast"}


def test_shard_is_stable_and_validated():
    with pytest.raises(InputError, match="K/N"):
        planning.parse_shard("0/2")
    item = plan_command("ops", OpsOptions(ops=("mul",), dtypes=("float32",)))[0]
    assert planning.in_shard(item, (1, 2)) != planning.in_shard(item, (2, 2))


def test_plan_options_round_trip_through_run_options():
    options = OpsOptions(ops=("mul",), exclude=("x*",), dtypes=("bfloat16",), grad=True, modes=("compile",), shard="1/3",
                         max_samples=2)
    assert options_from_dict(OpsOptions, options_to_dict(options)) == options


def test_a_run_stored_with_one_mode_resumes_in_that_mode():
    assert options_from_dict(OpsOptions, {"ops": ["mul"], "mode": "compile"}).modes == ("compile",)


def test_op_index_cache_is_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURON_CHECK_CACHE", str(tmp_path))
    monkeypatch.setattr(opindex, "_index_memo", None)
    first = opindex.op_index()
    assert list(tmp_path.glob("opinfo-index-*.json"))
    monkeypatch.setattr(opindex, "_index_memo", None)
    assert opindex.op_index() == first
