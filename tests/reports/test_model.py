"""The report data model: every section is grouping and counting of stored results."""

from op_db.sample import result, sample_results
from reports.model import build_report

RUN = {"id": 1, "backend": "sim", "device": "sim", "simulated": 1}


def test_summary_and_pass_rates():
    report = build_report(RUN, sample_results())
    assert report.summary["PASS"] == 4 and report.summary["REF_ERROR"] == 0
    assert sum(report.summary.values()) == len(report.results) == 12
    rates = {(r["suite"], r["dtype"]): r for r in report.pass_rates}
    # opinfo float32: PASS add, mul; FALLBACK median | UNSUPPORTED, CRASH, TIMEOUT; SKIP ignored.
    assert rates[("opinfo", "float32")]["pass_rate"] == 0.5
    assert rates[("opinfo", "all")]["items"] == 10
    assert report.simulated is True and report.run["simulated"] is True


def test_blockers_are_ranked_and_name_what_they_block():
    blockers = build_report(RUN, sample_results()).blockers
    assert [b["op"] for b in blockers] == ["aten.cumprod.default", "aten.mul.Tensor"]
    assert blockers[0]["items"] == 3
    assert blockers[0]["blocks"] == ["model:llama", "opinfo:cumprod"]
    assert blockers[0]["statuses"] == {"UNSUPPORTED": 2, "ERROR": 1}


def test_claim_discrepancies():
    claims = build_report(RUN, sample_results()).claims
    assert [(c["subject"], c["dtype"]) for c in claims["works_but_unclaimed"]] == [("add", "bfloat16")]
    assert [(c["subject"], c["dtype"]) for c in claims["claimed_but_fails"]] == [
        ("cumprod", "float32"), ("mul", "bfloat16")]


def test_matrices_fallbacks_models_and_fp8():
    report = build_report(RUN, sample_results())
    rows = {r["subject"]: r["cells"] for r in report.matrix.rows}
    assert rows["mul"] == {"float32": "PASS", "bfloat16": "MISMATCH"}
    assert "llama" not in rows and "cast" not in rows
    assert report.models.rows[0]["cells"] == {"float16": "ERROR"}
    assert report.fp8.dtypes == ["float8_e4m3fn"]
    assert report.fallbacks == [{"op": "aten.median.default", "items": 1, "subjects": ["opinfo:median"]}]


def test_optional_sections_are_absent_without_their_suites():
    report = build_report(RUN, [result("add", "float32", "PASS")])
    assert report.models is None and report.fp8 is None and report.blockers == []


def test_blockers_rank_by_subjects_unlocked_before_items():
    from op_db.records import Result, Status

    def failing(subject, dtype, op):
        return Result("model", subject, "forward", dtype, "eager", Status.UNSUPPORTED, failing_op=op)

    # histc blocks two models once each; rsqrt blocks one model in three dtypes.
    results = [failing("mixtral", "float32", "aten.histc.default"), failing("qwen3_moe", "float32", "aten.histc.default")]
    results += [failing("llama", dtype, "aten.rsqrt.default") for dtype in ("float32", "bfloat16", "float16")]
    blockers = build_report(RUN, results).blockers
    assert [(b["op"], b["subjects"], b["items"]) for b in blockers] == [
        ("aten.histc.default", 2, 2), ("aten.rsqrt.default", 1, 3)]


def test_the_zoo_census_ranks_blockers_by_the_models_using_them(tmp_path):
    import json

    import pytest

    from op_db.errors import InputError
    from op_db.records import Result, Status
    from reports.model import zoo_ops_from_census

    # histc blocks two OpInfo items; rsqrt one, but four zoo forwards dispatch rsqrt.
    results = [Result("opinfo", s, "default", "float32", "eager", Status.UNSUPPORTED, failing_op="aten.histc.default")
               for s in ("histc", "histogram")]
    results.append(Result("opinfo", "rsqrt", "default", "float32", "eager", Status.ERROR, failing_op="aten.rsqrt.default"))
    census = tmp_path / "census.json"
    census.write_text(json.dumps({"schema": 2, "models": [
        {"subject": name, "ops": ["aten.mm.default", "aten.rsqrt.default"]} for name in ("llama", "gpt2", "t5", "bert")
    ] + [{"subject": "broken", "ops": []}]}))
    blockers = build_report(RUN, results, zoo_ops=zoo_ops_from_census(census)).blockers
    assert [(b["op"], b["zoo_models"], b["subjects"]) for b in blockers] == [
        ("aten.rsqrt.default", 4, 1), ("aten.histc.default", 0, 2)]
    assert "zoo_models" not in build_report(RUN, results).blockers[0]
    census.write_text("{}")
    with pytest.raises(InputError, match="not a zoo census"):
        zoo_ops_from_census(census)
