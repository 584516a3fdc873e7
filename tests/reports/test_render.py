"""Every report format, read back by a standard reader."""

import io
import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from op_db.store import open_for_reading
from reports.export import render
from reports.model import report_from_json, report_from_store
from reports.render.parquet import parquet_schema


@pytest.fixture
def report(sample_db):
    with open_for_reading(sample_db) as store:
        return report_from_store(store, "latest")


def test_json_follows_the_design_and_round_trips(report, tmp_path):
    data = json.loads(render(report, "json"))
    assert data["schema"] == 1
    assert data["run"]["simulated"] is True and data["run"]["device"] == "sim"
    assert len(data["results"]) == len(report.results) == sum(data["summary"].values())
    assert data["summary"]["ERROR"] == 2
    mul = next(r for r in data["results"] if r["subject"] == "mul" and r["dtype"] == "bfloat16")
    assert mul["status"] == "MISMATCH" and mul["max_abs_err"] == 0.12
    (tmp_path / "r.json").write_text(json.dumps(data))
    assert report_from_json(tmp_path / "r.json").results == report.results


def test_parquet_has_the_documented_schema_and_one_row_per_result(report):
    table = pq.read_table(io.BytesIO(render(report, "parquet")))
    assert table.num_rows == len(report.results)
    assert table.schema.remove_metadata() == parquet_schema()
    assert table.schema.field("aten_ops").type == pa.list_(pa.struct([("op", pa.string()), ("count", pa.int64())]))
    rows = table.to_pylist()
    assert all(row["simulated"] for row in rows)
    add = next(r for r in rows if r["subject"] == "add" and r["dtype"] == "float32")
    assert add["aten_ops"] == [{"op": "aten.add.Tensor", "count": 3}]
    median = next(r for r in rows if r["subject"] == "median")
    assert median["fallback_ops"] == ["aten.median.default"]
    assert json.loads(table.schema.metadata[b"neuron_check.run"])["simulated"] is True


def test_junit_is_well_formed_with_one_testcase_per_result(report):
    root = ET.fromstring(render(report, "junit"))
    cases = root.findall(".//testcase")
    assert len(cases) == len(report.results)
    assert "simulated" in ET.tostring(root, encoding="unicode").lower()


class TextAndScripts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts, self.text, self._in_script = [], [], False

    def handle_starttag(self, tag, attrs):
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)


def test_html_is_self_contained_and_escapes_untrusted_text(report, hostile):
    page = render(report, "html")
    parser = TextAndScripts()
    parser.feed(page)
    assert "pwned" not in "".join(parser.scripts)  # never inside a script element
    assert hostile in "".join(parser.text)  # shown as text
    assert "<script>document.title" not in page
    assert "http://" not in page and "https://" not in page  # no network
    assert page.count('data-status="') == len(report.results)
    assert "SIMULATED" in page


@pytest.mark.parametrize("fmt", ["table", "md"])
def test_text_formats_show_every_section_and_the_simulated_label(report, fmt):
    text = render(report, fmt)
    for heading in ("Counts per status", "Pass rate", "Coverage matrix", "Models x dtype", "FP8 readiness",
                    "block the most", "claim discrepancies", "CPU fallbacks"):
        assert heading in text
    assert "SIMULATED" in text
    if fmt == "md":
        assert "\\| pipe" in text  # a '|' in a message cannot split a Markdown cell
