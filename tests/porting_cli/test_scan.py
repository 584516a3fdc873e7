"""Static scan: exact findings on fixtures and snippets, clean code, bad input."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from op_db.errors import InputError
from porting_cli.analysis.scan import RULES, ScanError, rules_markdown, scan_file, scan_source
from porting_cli.analysis.scan.engine import analyze

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The docs' walk-through of every idiom (docs/porting-recall.md) is a fixture too, so it stays true.
IDIOMS_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "porting_idioms.py"
EXAMPLES = ROOT / "examples"
EXPECT = re.compile(r"# expect: (.*)$")


def expected_from_comments(path: Path) -> dict[int, list[str]]:
    out = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = EXPECT.search(line)
        if m:
            out[n] = sorted(m.group(1).split())
    return out


def by_line(findings) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for f in findings:
        out.setdefault(f.line, []).append(f.rule_id)
    return {k: sorted(v) for k, v in out.items()}


#: fixtures whose `# expect:` comments name every finding of every line
EXPECT_FIXTURES = [*(FIXTURES / name for name in ("cuda_all.py", "idioms_device_index.py", "idioms_device_strings.py",
                                                  "idioms_cuda_api.py", "idioms_amp_libs.py", "idioms_frameworks.py")),
                   IDIOMS_EXAMPLE]


@pytest.mark.parametrize("path", EXPECT_FIXTURES, ids=lambda p: p.name)
def test_fixture_gives_exactly_the_expected_findings(path):
    assert by_line(scan_file(path).findings) == expected_from_comments(path)


def test_every_rule_is_exercised_by_the_fixtures():
    # integer_devices_torch24.py holds the rules of an older torch (test_scan_torch_semantics.py)
    used = {r for path in (*EXPECT_FIXTURES, FIXTURES / "integer_devices_torch24.py")
            for ids in expected_from_comments(path).values() for r in ids}
    # NC706 depends on what is installed: test_scan_recall.py installs a fake package for it
    assert used | {"NC706"} == {r.id for r in RULES}


@pytest.mark.parametrize("name", ["clean_train.py"])
def test_clean_fixture_has_no_findings(name):
    result = scan_file(FIXTURES / name)
    assert result.findings == []
    assert result.effort.overall == "none" and result.effort.total == 0


CLEAN_SNIPPETS = [
    'print("cuda")\n',
    'log.info("moving the model to cuda")\n',
    'msg = "running on cuda:0 now"\n',
    "x = x.to(device)\n",
    "x = x.float().to(torch.float32)\n",
    'dist.init_process_group(backend="gloo")\n',
    "# torch.cuda.synchronize() is commented out\n",
    'doc = """torch.cuda.synchronize()"""\n',
    "torch.accelerator.synchronize()\n",
    'model = AutoModel.from_pretrained("m", device_map="auto")\n',
    "y = x.to(torch.bfloat16)\n",
    # an argparse setting is not pinned memory (the loader that reads it is reported, below)
    "parser.set_defaults(pin_memory=True, batch_size=8)\n",
    'parser.add_argument("--pin", action="store_true", pin_memory=True)\n',
]


@pytest.mark.parametrize("source", CLEAN_SNIPPETS)
def test_code_that_is_not_cuda_specific_is_not_reported(source):
    assert scan_source(source).findings == []


SNIPPETS = [
    ("x = x.cuda()\n", [("NC101", 1, 7)]),  # at the CUDA token
    ("import torch as t\nt.cuda.synchronize()\n", [("NC205", 2, 1)]),
    ("from torch.cuda import synchronize as sync\nsync()\n", [("NC999", 1, 6), ("NC205", 2, 1)]),
    ("from torch import cuda\ncuda.empty_cache()\n", [("NC999", 1, 19), ("NC206", 2, 1)]),
    ('device = torch.device("cuda:1")\n', [("NC102", 1, 23)]),
    ("if torch.cuda.is_available():\n    pass\n", [("NC201", 1, 4)]),
    ("m = torch.cuda.memory.memory_allocated()\n", [("NC207", 1, 5)]),
    ("from torch.backends import cudnn\ncudnn.benchmark = True\n", [("NC999", 1, 28), ("NC401", 2, 1)]),
    ('os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "x"\n', [("NC912", 1, 12)]),
    ('backend = "cuda:nccl,cpu:gloo"\n', [("NC501", 1, 11)]),
    ("y = x.to(0)\n", [("NC111", 1, 10)]),  # the installed torch (>= 2.5): the current accelerator
    ("import apex.amp\n", [("NC305", 1, 8)]),
    ("import apex.optimizers\n", [("NC703", 1, 8)]),
    ("import cupy\n", [("NC704", 1, 8)]),
    ("try:\n    import flash_attn\nexcept ImportError:\n    flash_attn = None\n", [("NC705", 2, 12)]),
    ("import os\nr = int(os.getenv('LOCAL_RANK'))\ny = x.to(r)\n", [("NC111", 3, 10)]),
    ("def f(n):\n    return x.to(n)\n", []),  # a parameter fed by nothing CUDA-related
    ('mod = load("k", sources=["k.cpp", "k.cu"])\n', []),  # `load` not from cpp_extension
    ('from torch.utils.cpp_extension import load\nmod = load("k", sources=["k.cu"])\n',
     [("NC701", 2, 7)]),
    ("def f(x):\n    return x.type(torch.cuda.HalfTensor)\n", [("NC105", 2, 19)]),
    # pin_memory= is bound to its callee: the loader and the tensor factory, not argparse's defaults
    ("p.set_defaults(pin_memory=True)\nargs = p.parse_args()\nloader = DataLoader(ds, pin_memory=args.pin_memory)\n",
     [("NC214", 3, 25)]),
    ("x = torch.empty(2, pin_memory=True)\n", [("NC214", 1, 20)]),
    ("loader = DataLoader(ds, pin_memory=False)\n", []),
]


@pytest.mark.parametrize("source, expected", SNIPPETS)
def test_snippet_findings_have_rule_line_and_column(source, expected):
    found = [(f.rule_id, f.line, f.col) for f in scan_source(source).findings]
    assert found == expected


def test_finding_fields():
    (f,) = scan_source("import torch\ny = torch.zeros(2).cuda(0)\n", path="t.py").findings
    assert (f.rule_id, f.path, f.line, f.col, f.end_line, f.end_col) == ("NC101", "t.py", 2, 20, 2, 27)
    assert f.source_line == "y = torch.zeros(2).cuda(0)"
    assert (f.severity, f.effort, f.fixable, f.family) == ("error", "none", True, "device")
    assert ".to(device)" in f.message
    assert str(f).startswith("t.py:2:20: NC101 error:")


def test_findings_are_sorted_and_effort_is_summarised():
    result = scan_source("import triton\nx = x.cuda()\ntorch.backends.cudnn.benchmark = True\n")
    assert [(f.line, f.rule_id) for f in result.findings] == [(1, "NC702"), (2, "NC101"), (3, "NC401")]
    effort = result.effort
    assert effort.overall == "high"
    assert effort.by_effort == {"none": 1, "low": 1, "medium": 0, "high": 1}
    assert effort.total == 3 and effort.fixable == 1


SCANNED = [*EXPECT_FIXTURES, FIXTURES / "cuda_runnable.py",
           FIXTURES / "clean_train.py", *sorted(EXAMPLES.glob("*.py"))]


@pytest.mark.parametrize("path", SCANNED, ids=lambda p: p.name)
def test_the_fast_path_finds_what_the_full_parse_finds(path):
    text = path.read_text()
    assert analyze(text, str(path)).findings == analyze(text, str(path), reduce=False).findings


EXAMPLE_RULES = {
    "gpt_amp_train.py": {"NC101", "NC205", "NC207", "NC208", "NC301", "NC302", "NC401", "NC402"},
    "hf_finetune.py": {"NC101", "NC102", "NC202", "NC206"},
    "ddp_train.py": {"NC101", "NC204", "NC501", "NC911"},
}


@pytest.mark.parametrize("name, rules", sorted(EXAMPLE_RULES.items()))
def test_examples_are_flagged(name, rules):
    assert {f.rule_id for f in scan_file(EXAMPLES / name).findings} == rules


def test_bad_inputs_raise_one_clear_sentence(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n\ndef f(:\n")
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# caf\xe9\nx = 1\n")
    cases = [
        (tmp_path / "missing.py", f"{tmp_path / 'missing.py'}: no such file."),
        (tmp_path, f"{tmp_path} is a directory, not a Python file."),
        (bad, f"{bad}:3: syntax error: "),
        (latin, f"{latin} is not UTF-8 text (byte 0xe9 at offset 5)"),
    ]
    for path, start in cases:
        with pytest.raises(ScanError) as info:
            scan_file(path)
        assert isinstance(info.value, InputError)
        message = str(info.value)
        assert message.startswith(start) and message.endswith(".") and "\n" not in message


def test_syntax_error_in_source_text():
    with pytest.raises(ScanError, match=r"^<string>:1: syntax error"):
        scan_source("x = (\n")


def test_scanning_does_not_import_torch():
    code = ("import sys, porting_cli.analysis.scan as s, porting_cli.analysis.fix as f\n"
            f"s.scan_file({str(FIXTURES / 'cuda_all.py')!r})\n"
            f"f.fix_file({str(FIXTURES / 'cuda_all.py')!r}, write=False)\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True)
    assert out.stdout.strip() == "False"


def test_rules_table_is_well_formed():
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids)) and all(re.fullmatch(r"NC\d{3}", i) for i in ids)
    table = rules_markdown()
    assert all(f"| {i} |" in table for i in ids)
