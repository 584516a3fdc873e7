"""A model MISMATCH shows its first divergent module, and the failing op where known, in the table,
Markdown and HTML reports, not only in JSON (issue 31, item 4)."""

import pytest

from op_db.sample import result, sample_results
from reports.export import render
from reports.model import build_report

MODULE = "model.layers.0.mlp.act_fn (SiLUActivation)"
HOSTILE_MODULE = "model.h.<script>alert(1)</script> (Block&Co)"


def model_mismatch(divergence, failing_op=None):
    return result("llama", "bfloat16", "MISMATCH", suite="model", variant="forward", divergence=divergence,
                  failing_op=failing_op, message="logits: rmse vs float64 oracle 0.25 > 3 x CPU's 0.001")


def report_of(*extra):
    return build_report({"id": 1, "backend": "sim", "device": "sim", "simulated": True}, [*sample_results(), *extra])


@pytest.mark.parametrize("fmt", ["table", "md"])
def test_text_reports_name_the_module_and_the_op(fmt):
    text = render(report_of(model_mismatch(MODULE, "aten.silu.default")), fmt)
    failures = text[text.index("Failures"):]
    row = next(line for line in failures.splitlines() if "model.llama" in line)
    assert MODULE in row and "aten.silu.default" in row and "MISMATCH" in row
    assert "first divergent module" in failures


def test_an_op_sweep_table_keeps_its_columns():
    sweep = [r for r in sample_results() if r.suite == "opinfo"]
    run = {"id": 1, "backend": "sim", "device": "sim", "simulated": True}
    assert "first divergent module" not in render(build_report(run, sweep), "table")


def test_html_shows_the_module_escaped():
    page = render(report_of(model_mismatch(HOSTILE_MODULE, "aten.silu.default")), "html")
    assert "<th>first divergent module</th>" in page
    assert "<td>model.h.&lt;script&gt;alert(1)&lt;/script&gt; (Block&amp;Co)</td>" in page
    assert "<script>alert(1)" not in page
    assert "<td>aten.silu.default</td>" in page
