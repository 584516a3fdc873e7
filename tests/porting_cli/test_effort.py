"""Effort per distinct change and the verdict: what blocks, what is an API substitution."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from porting_cli.analysis.effort import HOURS, change_items, decide
from porting_cli.cli.port_report import build_report, finding_dict
from porting_cli.analysis.scan import scan_file, scan_source

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def report_of(source: str, path: str = "s.py") -> dict:
    return build_report(path, scan_source(source, path), "").to_dict()


def test_forty_nvtx_ranges_are_one_change_item():
    scan = scan_file(FIXTURES / "nvtx_ranges.py")
    assert [f.rule_id for f in scan.findings] == ["NC211"] * 40
    report = build_report("nvtx_ranges.py", scan, "").to_dict()
    (item,) = report["items"]
    assert (item["family"], item["rules"], item["count"], item["effort"]) == ("cuda-api", ["NC211"], 40, "low")
    assert (item["hours_low"], item["hours_high"]) == HOURS["low"]
    assert "40 finding(s) on 40 line(s)" in item["rationale"]
    assert report["verdict"] != "blocked"


def test_is_bf16_supported_is_a_low_fixable_item_and_not_blocked():
    scan = scan_file(FIXTURES / "bf16_check.py")
    (finding,) = scan.findings
    assert (finding.rule_id, finding.line, finding.effort, finding.fixable) == ("NC212", 4, "low", True)
    report = build_report("bf16_check.py", scan, "").to_dict()
    assert report["verdict"] == "ready-with-fixes" and report["blocked_by"] == []
    assert report["effort"]["overall"] == "low" and report["effort"]["items"] == 1


@pytest.mark.parametrize("source", [
    "import torch.nn as nn\nm = nn.DataParallel(nn.Linear(2, 2))\n",                 # medium, advice
    "import flash_attn\n",                                                           # SDPA replaces it
    "from apex import amp\nm, o = amp.initialize(m, o)\n",                            # torch.amp replaces it
    "import torch\ntorch.backends.cuda.enable_flash_sdp(False)\n",
    "import torch\nwith torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):\n    pass\n",
    "try:\n    import triton\nexcept ImportError:\n    triton = None\n",              # has a fallback
])
def test_api_substitutions_never_block(source):
    report = report_of(source)
    assert report["verdict"] != "blocked" and report["blocked_by"] == [], report["reasons"]
    assert report["items"]


@pytest.mark.parametrize("source, rule", [
    ("import triton\n", "NC702"),
    ("import cupy\n", "NC704"),
    ("from torch.utils.cpp_extension import load\nm = load('k', sources=['k.cu'])\n", "NC701"),
])
def test_new_code_blocks_and_names_its_items(source, rule):
    report = report_of(source)
    assert report["verdict"] == "blocked"
    blocking = [i for i in report["items"] if i["id"] in report["blocked_by"]]
    assert [i["rules"] for i in blocking] == [[rule]] and all(i["blocks"] for i in blocking)
    assert report["reasons"][0].startswith(f"{blocking[0]['id']}: ")


def test_items_are_per_family_and_file_and_a_library_counts_once_per_project():
    a = scan_source("import flash_attn\nx = x.cuda()\ny = y.cuda()\ntorch.cuda.synchronize()\n", "a.py")
    b = scan_source("import flash_attn.ops\nz = z.cuda()\n", "b.py")
    findings = [finding_dict(f) for f in [*a.findings, *b.findings]]
    items = change_items(findings, [], None)
    keys = sorted((i.family, i.path, i.count) for i in items)
    assert keys == [("cuda-api", "a.py", 1), ("device", "a.py", 2), ("device", "b.py", 1),
                    ("kernels", None, 2)]
    verdict = decide(items, None)
    assert verdict.verdict == "ready-with-fixes" and verdict.blocked_by == []


def test_effort_sums_the_item_ranges():
    report = report_of("import flash_attn\nx = x.cuda()\n")
    effort = report["effort"]
    assert effort["items"] == 2 and effort["overall"] == "medium"
    assert (effort["hours_low"], effort["hours_high"]) == (HOURS["medium"][0] + HOURS["none"][0],
                                                           HOURS["medium"][1] + HOURS["none"][1])


def project_report(sources: dict[str, str]) -> dict:
    from porting_cli.analysis.scan import ScanResult

    findings = [f for path, text in sources.items() for f in scan_source(text, path).findings]
    return build_report("proj", ScanResult(path="proj", findings=findings, lines=1), "").to_dict()


def test_summary_table_and_json_name_the_same_items_as_fixed():
    """Eleven items (more than a summary used to name), one by hand, one informational: the verdict
    line, the table's fix column and the JSON agree item by item (issue 31, item 3)."""
    from reports.render.porting import render

    sources = {f"m{n:02}.py": "x = x.cuda()\n" for n in range(9)}
    sources["env.py"] = "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n"
    sources["marks.py"] = "import torch\ntorch.cuda.nvtx.range_push('step')\n"
    report = project_report(sources)
    items = report["items"]
    assert len(items) == 11 and report["effort"]["items"] == 11
    fixed = [i["id"] for i in items if i["fixable"]]
    by_hand = [i["id"] for i in items if not i["fixable"] and i["needs_change"]]
    info = [i["id"] for i in items if not i["fixable"] and not i["needs_change"]]
    assert (len(fixed), len(by_hand), len(info)) == (9, 1, 1)
    assert report["reasons"] == [f"11 change items: 9 applied by --fix ({', '.join(fixed)}); "
                                 f"1 to change by hand ({by_hand[0]}); "
                                 f"1 informational, no change needed ({info[0]})"]
    table = render(report, "table")
    assert f"  - {report['reasons'][0]}\n" in table
    assert "Effort: low (11 change items from 11 finding(s)" in table
    column = dict(re.findall(r"^(C\d+)\s+\S+\s+\S+ h\s+(yes|no) ", table, re.MULTILINE))
    assert column == {i["id"]: "yes" if i["fixable"] else "no" for i in items}


def test_a_ready_script_with_only_informational_items_still_names_them():
    report = report_of("import torch\ntorch.cuda.nvtx.range_push('step')\n")
    (item,) = report["items"]
    assert report["verdict"] == "ready"
    assert report["reasons"] == ["no CUDA-specific code needs a change (runtime not checked: --static-only)",
                                 f"1 change item: 1 informational, no change needed ({item['id']})"]
