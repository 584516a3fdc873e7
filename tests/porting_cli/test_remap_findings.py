"""Remapped call sites are findings (NCRT1) that count in the verdict."""

import pytest

from porting_cli.cli.port_report import build_report
from porting_cli.runtime.remap_findings import advice_for, remap_findings
from porting_cli.analysis.scan import scan_source
from porting_cli.runtime.trace import OpUse, TraceResult

CLEAN = "import torch\ndevice = config.device\nx = torch.ones(2, device=device)\n"


def traced(remapped):
    return TraceResult(script="s.py", device="sim", backend="sim", simulated=True, outcome="finished",
                       uses=[OpUse("aten.ones.default", (), "s.py:3", 1)], remapped=remapped)


def test_a_line_only_the_remap_saw_turns_ready_into_ready_with_fixes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.py").write_text(CLEAN)
    scan = scan_source(CLEAN, "s.py")
    assert build_report("s.py", scan, "", traced([])).verdict == "ready"
    report = build_report("s.py", scan, "", traced([{"site": "s.py:3", "what": "ones(device='cuda') -> 'sim'",
                                                      "count": 2}])).to_dict()
    assert report["verdict"] == "ready-with-fixes"
    [finding] = [f for f in report["findings"] if f["rule"] == "NCRT1"]
    assert (finding["path"], finding["line"], finding["effort"], finding["count"]) == ("s.py", 3, "low", 2)
    assert finding["message"] == ("works by remap (ones(device='cuda') -> 'sim'); "
                                  "fix: pass the chosen device instead of a 'cuda' device")
    assert finding["source_line"] == "x = torch.ones(2, device=device)"
    assert report["effort"]["hours"] > 0 and report["rules"]["NCRT1"]["name"] == "works-by-remap"
    [item] = [i for i in report["items"] if i["rules"] == ["NCRT1"]]
    assert item["needs_change"] and item["effort"] == "low"


def test_a_line_the_scan_already_reports_is_marked_covered_and_adds_no_effort():
    static = [{"rule": "NC101", "path": "./m.py", "line": 4, "severity": "error", "fixable": True}]
    [finding] = remap_findings([{"site": "m.py:4", "what": "Module.cuda() -> .to('sim')", "count": 1}], static)
    assert (finding["covered_by"], finding["effort"], finding["severity"], finding["fixable"]) == (
        "NC101", "none", "info", True)
    assert finding["message"].endswith("(the scan reports this line as NC101)")


def test_remaps_in_library_code_are_no_findings():
    assert remap_findings([{"site": None, "what": "torch.cuda.is_available() -> sim", "count": 3}], []) == []


@pytest.mark.parametrize("what, advice", [
    ("Tensor.cuda() -> .to('sim')", "use .to(device)"),
    ("torch.cuda.amp.GradScaler -> torch.amp.GradScaler('sim')", "use torch.amp.GradScaler(device.type)"),
    ("init_process_group(backend='nccl') -> 'gloo'", "choose the backend from the device"),
    ("torch.cuda.synchronize() -> sim", "use the torch.accelerator API"),
    ("autocast('cuda') -> autocast('sim')", "pass device_type=device.type"),
])
def test_each_remap_kind_gets_its_own_fix(what, advice):
    assert advice_for(what).startswith(advice)
