"""Vendor claims against measurements: table parsing, verdicts on a real sim run, export, gate."""

import json

import pytest
from click.testing import CliRunner

from op_db.records import Status
from op_db.sample import result, sample_results
from porting_cli.cli.app import main
from reports.claims import judge_claims, verdict
from reports.claims_table import ClaimRow, read_claims

CLAIMS_MD = """# Vendor compatibility table

Intro text that is not a table.

| PyTorch API | Status | Limitations |
|---|:---:|---|
| `torch.add` | Y | |
| `torch.mul` | N | not lowered yet |
| [`torch.nn.functional.layer_norm`](https://example.invalid/ln) | Y | |
| `torch.sin` | CPU_FALLBACK | aten::sin runs on CPU |
| `torch.cos` | Y | |
"""
EXPECTED = {
    "torch.add": "agree",
    "torch.mul": "works-but-claimed-unsupported",
    "torch.nn.functional.layer_norm": "claimed-but-fails",
    "torch.sin": "fallback-claimed-but-native",
    "torch.cos": "untested",
}


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory):
    """A real sim run of add, mul, layer_norm and sin in float32, with layer_norm unsupported."""
    root = tmp_path_factory.mktemp("claims")
    profile = root / "no_layer_norm.json"
    profile.write_text(json.dumps({"name": "no-layer-norm", "unsupported_ops": ["aten.native_layer_norm.*"]}))
    db = root / "run.db"
    with pytest.MonkeyPatch.context() as patch:  # the CLI exports the profile to the environment
        patch.setenv("NEURON_CHECK_SIM_PROFILE", str(profile))
        out = cli("ops", "--device", "sim", "--ops", "add,mul,nn.functional.layer_norm,sin", "--dtype", "fp32",
                  "--max-samples", "2", "--db", db)
    assert out.exit_code == 0, out.output
    return db


@pytest.fixture
def claims_md(tmp_path):
    path = tmp_path / "vendor.md"
    path.write_text(CLAIMS_MD, encoding="utf-8")
    return path


def test_report_claims_gives_one_verdict_per_row(sim_run, claims_md):
    out = cli("report", "--db", sim_run, "--claims", claims_md, "--format", "json")
    assert out.exit_code == 0, out.output
    section = json.loads(out.stdout)["sections"]["claims"]
    assert {row["op"]: row["verdict"] for row in section["rows"]} == EXPECTED
    rows = {row["op"]: row for row in section["rows"]}
    assert rows["torch.nn.functional.layer_norm"]["measured"] == {"float32": "UNSUPPORTED"}
    assert rows["torch.nn.functional.layer_norm"]["items"] == ["opinfo.nn.functional.layer_norm.forward.float32.eager"]
    assert rows["torch.cos"]["measured"] == {} and rows["torch.cos"]["items"] == []
    assert rows["torch.mul"]["limitations"] == "not lowered yet" and rows["torch.mul"]["line"] == 8
    assert section["verdicts"]["native-claimed-but-fallback"] == 0 and section["verdicts"]["agree"] == 1
    # The suite's own dtype claims stay beside the vendor's.
    assert "works_but_unclaimed" in section and "claimed_but_fails" in section


@pytest.mark.parametrize("fmt, marker", [("table", "== Vendor claims vs measured"), ("md", "## Vendor claims vs measured"),
                                         ("html", 'id="vendor-claims"')])
def test_claims_section_in_every_text_format(sim_run, claims_md, fmt, marker):
    out = cli("report", "--db", sim_run, "--claims", claims_md, "--format", fmt)
    assert out.exit_code == 0, out.output
    assert marker in out.stdout
    for verdict_name in EXPECTED.values():
        assert verdict_name in out.stdout


def test_export_reads_back_as_all_agree(sim_run, tmp_path):
    table = tmp_path / "published.md"
    out = cli("claims", "export", "--db", sim_run, "--run", "latest", "-o", table)
    assert out.exit_code == 0, out.output
    text = table.read_text()
    assert "| torch.nn.functional.layer_norm | N | float32 |" in text and "| torch.add | Y | float32 |" in text
    back = json.loads(cli("report", "--db", sim_run, "--claims", table, "--format", "json").stdout)
    assert [r["verdict"] for r in back["sections"]["claims"]["rows"]] == ["agree"] * 4
    csv_out = cli("claims", "export", "--db", sim_run, "--format", "csv")
    assert csv_out.stdout.splitlines()[0] == "PyTorch API,Status,Dtypes,Limitations"


def test_gate_fails_on_claimed_but_fails_only_when_asked(sim_run, claims_md):
    lenient = cli("gate", "--db", sim_run, "--claims", claims_md)
    assert lenient.exit_code == 0, lenient.output
    assert "claimed-but-fails 1" in lenient.output
    strict = cli("gate", "--db", sim_run, "--claims", claims_md, "--fail-on-claims", "--format", "json")
    assert strict.exit_code == 1
    report = json.loads(strict.stdout)
    assert not report["passed"]
    assert [row["op"] for row in report["claims_failing"]] == ["torch.nn.functional.layer_norm"]
    assert cli("gate", "--db", sim_run, "--fail-on-claims").exit_code == 2


# -- parsing -------------------------------------------------------------------


def test_csv_with_synonym_headers_spellings_dtypes_and_aten(tmp_path):
    path = tmp_path / "claims.csv"
    path.write_text("Operator,Supported?,Data types,Notes\n"
                    "torch.Tensor.add_,yes,\"fp32, bf16\",\n"
                    "F.relu,\u2713,all,\n"
                    "aten::mul.Tensor,fallback,,CPU\n"
                    ",,,\n"
                    "torch.div,Not supported,fp16,rounding modes\n", encoding="utf-8")
    rows = read_claims(path)
    assert [(r.apis, r.claim, r.dtypes, r.line) for r in rows] == [
        (("torch.Tensor.add_",), "Y", ("float32", "bfloat16"), 2),
        (("F.relu",), "Y", None, 3),
        (("aten::mul.Tensor",), "CPU_FALLBACK", None, 4),
        (("torch.div",), "N", ("float16",), 6),
    ]
    assert rows[3].limitations == "rounding modes"


def test_markdown_picks_the_claims_table_and_keeps_escaped_pipes(tmp_path):
    path = tmp_path / "doc.md"
    path.write_text("| Version | Date |\n|---|---|\n| 2.1 | today |\n\n"
                    "| ATen op | Neuron support | Limitations |\n|---|---|---|\n"
                    "| aten::add.Tensor | \u274c | a \\| b |\n", encoding="utf-8")
    (row,) = read_claims(path)
    assert row.apis == ("aten::add.Tensor",) and row.claim == "N" and row.limitations == "a | b" and row.line == 7


@pytest.mark.parametrize("name, text, phrase", [
    ("nocols.csv", "function,whatever\ntorch.add,Y\n", "nocols.csv:1: the table has no recognisable status column"),
    ("noapi.md", "| a | Status |\n|---|---|\n| x | Y |\n", "noapi.md:1: the table has no recognisable API column"),
    ("word.csv", "api,status\ntorch.add,Y\ntorch.mul,maybe\n", "word.csv:3: unknown status 'maybe'"),
    ("dtype.csv", "api,status,dtype\ntorch.add,Y,fp99\n", "dtype.csv:2: unknown dtype 'fp99'"),
    ("empty.md", "no table here\n", "empty.md:1: no table found"),
])
def test_bad_claims_table_is_one_sentence_naming_file_and_line(sim_run, tmp_path, name, text, phrase):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    for args in (["report", "--db", sim_run, "--claims", path], ["gate", "--db", sim_run, "--claims", path]):
        out = cli(*args)
        assert out.exit_code == 2, out.output
        lines = out.output.strip().splitlines()
        assert len(lines) == 1 and phrase in lines[0] and "Traceback" not in out.output


@pytest.mark.parametrize("args", [
    ["report", "--claims", "{claims}", "--format", "html", "-o", "{tmp}/missing/report.html"],
    ["claims", "export", "-o", "{tmp}/missing/table.md"],
    ["report", "--format", "hf", "-o", "{tmp}/missing/ds"],
])
def test_unwritable_output_is_one_sentence_and_exit_2(sim_run, claims_md, tmp_path, args):
    args = [a.format(claims=claims_md, tmp=tmp_path) for a in args]
    out = cli(*args[:1 + (args[0] == "claims")], "--db", sim_run, *args[1 + (args[0] == "claims"):])
    assert out.exit_code == 2, out.output
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and "cannot write" in lines[0] and f"{tmp_path}/missing" in lines[0]


# -- verdict rules -------------------------------------------------------------


@pytest.mark.parametrize("claim, measured, expected", [
    ("Y", {"float32": "PASS", "bfloat16": "PASS"}, "agree"),
    ("Y", {"float32": "PASS", "bfloat16": "MISMATCH"}, "claimed-but-fails"),
    ("Y", {"float32": "FALLBACK"}, "native-claimed-but-fallback"),
    ("Y", {"float32": "SKIP"}, "untested"),
    ("CPU_FALLBACK", {"float32": "FALLBACK", "bfloat16": "PASS"}, "agree"),
    ("CPU_FALLBACK", {"float32": "PASS"}, "fallback-claimed-but-native"),
    ("CPU_FALLBACK", {"float32": "CRASH"}, "claimed-but-fails"),
    ("N", {"float32": "UNSUPPORTED"}, "agree"),
    ("N", {"float32": "UNSUPPORTED", "bfloat16": "PASS"}, "works-but-claimed-unsupported"),
    ("N", {"float32": "FALLBACK"}, "works-but-claimed-unsupported"),
    ("N", {}, "untested"),
])
def test_verdict_table(claim, measured, expected):
    assert verdict(claim, {d: Status(s) for d, s in measured.items()}) == expected


def _row(api, claim, dtypes=None):
    return ClaimRow(source="t.md", line=1, apis=(api,), claim=claim, dtypes=dtypes, limitations=None)


def test_dtype_column_restricts_the_measured_items():
    results = sample_results()  # mul: float32 PASS, bfloat16 MISMATCH
    opinfos = {"torch.mul": ["mul"]}.get
    (only_fp32, every_dtype) = judge_claims(results, [_row("torch.mul", "Y", ("float32",)), _row("torch.mul", "Y")],
                                            opinfos_of=lambda api: opinfos(api, []))
    assert only_fp32["verdict"] == "agree" and only_fp32["measured"] == {"float32": "PASS"}
    assert every_dtype["verdict"] == "claimed-but-fails" and every_dtype["measured"]["bfloat16"] == "MISMATCH"


def test_aten_claims_use_recorded_ops_and_ignore_items_failing_elsewhere():
    results = [
        result("add", "float32", "PASS", aten_ops={"aten.add.Tensor": 2}),
        result("addcmul", "float32", "MISMATCH", aten_ops={"aten.add.Tensor": 1, "aten.mul.Tensor": 1},
               failing_op="aten.mul.Tensor"),
        result("median", "float32", "FALLBACK", aten_ops={"aten.median.default": 1}, fallback_ops=["aten.median.default"]),
    ]
    rows = judge_claims(results, [_row("aten::add.Tensor", "Y"), _row("aten::mul", "Y"),
                                  _row("torch.ops.aten.median.default", "Y"), _row("aten::cumsum", "N")],
                        opinfos_of=lambda api: [])
    assert [(r["verdict"], r["measured"]) for r in rows] == [
        ("agree", {"float32": "PASS"}),  # addcmul failed in mul, which says nothing about add
        ("claimed-but-fails", {"float32": "MISMATCH"}),
        ("native-claimed-but-fallback", {"float32": "FALLBACK"}),
        ("untested", {}),
    ]
    assert rows[0]["items"] == ["opinfo.add.forward.float32.eager"]
