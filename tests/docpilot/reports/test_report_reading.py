"""Reading a report file: what is wrong with one that cannot be read is said, with the line where there is one."""

from __future__ import annotations

import pytest

from docpilot.errors import ReportError
from docpilot.reports.report import load_report
from tests.conftest import DATA


def test_a_report_reads_back_as_it_was_written(tmp_path):
    report = load_report(DATA / "reports" / "small.json")
    copy = tmp_path / "copy.json"
    copy.write_text(report.model_dump_json(indent=1))
    assert load_report(copy) == report


@pytest.mark.parametrize(("text", "expected"), [
    ('{\n  "schema_version": 1,\n  "rows": [\n}\n', ":4: not valid JSON"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply to be a DocPilot report"),
    ('{"rows": []}', "not a DocPilot report: "),
    ("[]", "not a DocPilot report: "),
])
def test_a_file_that_is_no_report_is_named_with_what_is_wrong(tmp_path, text, expected):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ReportError) as raised:
        load_report(path)
    assert str(path) in str(raised.value) and expected in str(raised.value)
