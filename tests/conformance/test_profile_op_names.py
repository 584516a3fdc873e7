"""Every op-naming key of a sim profile refuses a name this torch lacks, with the closest names,
and `--ops` names every pattern that matches nothing (issue 31, item 5)."""

from __future__ import annotations

import pytest

from conformance.opinfo.plan import match_ops
from op_db.errors import InputError
from op_db.sim_profile import load_profile

TYPO = ("'aten.mull.Tensor', which is not an operator of this torch (did you mean 'aten.mul.Tensor', "
        "'aten.mul_.Tensor' or 'aten.multiply.Tensor'?); expected an overload like 'aten.mul.Tensor' "
        "or 'aten.sin.default'.")


def entry(key: str, op: str) -> dict:
    if key in ("faults", "compile_faults"):
        return {key: [{"op": "aten.add.Tensor", "kind": "nan"}, {"op": op, "kind": "nan"}]}
    return {key: ["aten.add.Tensor", op]}


@pytest.mark.parametrize("key", ["faults", "unsupported_ops", "fallback_ops", "compile_faults",
                                 "compile_unsupported_ops"])
def test_every_op_key_refuses_a_typo_and_suggests(key):
    with pytest.raises(InputError) as refused:
        load_profile(entry(key, "aten.mull.Tensor"))
    assert str(refused.value) == f"In the sim profile: {key} entry 1 names {TYPO}"


@pytest.mark.parametrize("key", ["unsupported_ops", "faults"])
def test_a_glob_must_match_an_operator(key):
    assert load_profile(entry(key, "aten.sort.*"))  # matches aten.sort.default, aten.sort.stable, ...
    with pytest.raises(InputError) as refused:
        load_profile(entry(key, "aten.sortt.*"))
    assert str(refused.value) == (f"In the sim profile: {key} entry 1 has the glob 'aten.sortt.*', which matches "
                                  "no operator of this torch (did you mean 'aten.sort.*', 'aten.msort.*' or "
                                  "'aten.sqrt.*'?).")


def test_a_packet_without_overload_is_refused_with_its_glob():
    with pytest.raises(InputError, match=r"names 'aten\.mul', which is not an operator of this torch \(did you "
                                         r"mean 'aten\.mul\.\*' or one overload, such as 'aten\.mul\.Scalar'\?\)"):
        load_profile({"unsupported_ops": ["aten.mul"]})


NAMES = ["add", "mul", "linalg.inv", "linalg.inv_ex", "linalg.pinv", "nn.functional.linear", "sub"]


def test_ops_names_every_bad_pattern_with_its_closest_names():
    with pytest.raises(InputError) as refused:
        match_ops(NAMES, ("mull", "add", "lienar", "linalg.invv*", "zzzq"))
    assert str(refused.value) == (
        "--ops patterns 'mull' (did you mean 'mul'?), 'lienar' (did you mean 'nn.functional.linear'?), "
        "'linalg.invv*' (did you mean 'linalg.inv', 'linalg.pinv' or 'linalg.inv_ex'?), 'zzzq' match no "
        "OpInfo op (try a glob such as 'nn.functional.*').")


def test_one_bad_pattern_reads_in_the_singular():
    with pytest.raises(InputError) as refused:
        match_ops(NAMES, ("sbu",), "--exclude")
    assert str(refused.value) == ("--exclude pattern 'sbu' (did you mean 'sub'?) matches no OpInfo op "
                                  "(try a glob such as 'nn.functional.*').")
