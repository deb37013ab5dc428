"""JUnit XML: well-formed, counts that match its testcases, one testcase per record and per gate.

The fixture report (tests/data/reports/small.json, described in test_html_report.py)
has eight records, six of them with a failing outcome (one by an error), and four
gates of which two fail; only pos-invented is named by a failed gate.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from docpilot.readout.files import write_readout
from docpilot.readout.junit import render_junit
from docpilot.readout.outcomes import prepare_readout
from docpilot.reports.report import load_report, rescore
from docpilot.schema import GateResult
from tests.conftest import DATA

SMALL = DATA / "reports" / "small.json"
INJECTED_ID = 'x"><script>window.__pwned=3</script>'


@pytest.fixture
def report():
    return load_report(SMALL)


def parse(report, tmp_path) -> ET.Element:
    return ET.fromstring(render_junit(prepare_readout(report, reports_dir=tmp_path)).encode("utf-8"))


def cases(root: ET.Element) -> dict[str, ET.Element]:
    return {case.get("name"): case for case in root.iter("testcase")}


def test_one_suite_whose_counts_match_its_testcases(report, tmp_path):
    root = parse(report, tmp_path)
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    testcases = suite.findall("testcase")
    assert len(testcases) == len(report.rows) + len(report.gates) == 12
    counted = {tag: sum(1 for c in testcases if c.find(tag) is not None) for tag in ("failure", "error", "skipped")}
    assert counted == {"failure": 3, "error": 0, "skipped": 0}  # pos-invented + the 2 failed gates
    for element in (root, suite):
        assert element.get("tests") == "12"
        assert element.get("failures") == "3" and element.get("errors") == "0" and element.get("skipped") == "0"
        assert element.get("time") == "6.100"
    assert suite.get("name") == "docpilot.golden.all" and suite.get("timestamp") == report.created_at
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties["run_id"] == report.run_id and properties["verdict"] == "fail"


def test_testcase_attributes_follow_the_usual_schema(report, tmp_path):
    for case in parse(report, tmp_path).iter("testcase"):
        assert set(case.attrib) == {"classname", "name", "time"}
        float(case.get("time"))
        for child in case:
            assert child.tag in ("failure", "error", "skipped", "system-out")
            if child.tag in ("failure", "error"):
                assert set(child.attrib) == {"message", "type"}


def test_each_record_is_a_testcase_named_by_id_with_its_split_and_latency(report, tmp_path):
    by_name = cases(parse(report, tmp_path))
    assert by_name["pos-hit"].get("classname") == "docpilot.golden.dev"
    assert by_name["pos-refused"].get("classname") == "docpilot.golden.test"
    assert by_name["pos-hit"].get("time") == "0.012" and len(by_name["pos-hit"]) == 0
    assert len(by_name["neg-refused"]) == 0  # a refused negative passes


def test_a_record_fails_only_when_a_failed_gate_names_it(report, tmp_path):
    by_name = cases(parse(report, tmp_path))
    invented = by_name["pos-invented"].find("failure")
    assert invented.get("type") == "gate:hallucinated_citations"
    assert invented.get("message") == "breaks the gate hallucinated_citations"
    assert "hallucinated-citation: markers [7]" in invented.text


def test_other_outcomes_stay_readable_without_counting_as_failures(report, tmp_path):
    by_name = cases(parse(report, tmp_path))
    for name, cause in (("pos-miss", "not-retrieved"), ("neg-answered", "answered-negative"),
                        ("pos-refused", "model-refused"), ("pos-error", "error")):
        case = by_name[name]
        assert case.find("failure") is None and case.find("error") is None
        out = case.find("system-out").text
        assert out.startswith("outcome (not counted against the verdict): ") and f"{cause}: " in out
    assert "no gold entry (guide/deploy)" in by_name["pos-miss"].find("system-out").text
    assert "question: How do I deploy?" in by_name["pos-miss"].find("system-out").text
    assert by_name["pos-hit"].find("system-out") is None


def test_an_errored_turn_under_the_errors_gate_is_an_error_not_a_failure(report, tmp_path):
    gated = rescore(report.model_copy(update={"config": {**report.config, "gates": {}}}))
    assert any(g.metric == "errors" and not g.passed for g in gated.gates)
    errored = cases(parse(gated, tmp_path))["pos-error"]
    assert errored.find("failure") is None
    error = errored.find("error")
    assert error.get("type") == "error" and "HTTP 500 from the model service" in error.get("message")


def test_a_passing_run_has_no_failing_testcase(report, tmp_path):
    # Regression: a passing verdict once came with failures="18", a red CI test tab under a green job.
    rows = [r for r in report.rows if r.id in ("pos-hit", "pos-miss", "neg-refused")]
    passing = rescore(report.model_copy(update={"rows": rows, "config": {**report.config, "gates": {}}}))
    assert passing.verdict == "pass"
    root = parse(passing, tmp_path)
    assert root.get("failures") == "0" and root.get("errors") == "0"
    assert "not-retrieved" in cases(root)["pos-miss"].find("system-out").text


def test_gates_are_testcases_that_fail_with_the_gate(report, tmp_path):
    by_name = cases(parse(report, tmp_path))
    assert len(by_name["gate:scope_violations"]) == 0
    failed = by_name["gate:hallucinated_citations"].find("failure")
    assert failed.get("type") == "gate" and failed.get("message") == "hallucinated_citations == 0 failed: value 1"
    assert "records: pos-invented" in failed.text
    recall = by_name["gate:recall@8"].find("failure")
    assert recall.get("message").startswith("recall@8 >= 0.9 failed: value 0.")


def test_markup_and_control_characters_survive_as_well_formed_xml(report, tmp_path):
    text = render_junit(prepare_readout(report, reports_dir=tmp_path))
    root = ET.fromstring(text.encode("utf-8"))  # a raw \x07 from the error text would make this raise
    assert "\x07" not in text
    assert INJECTED_ID in cases(root)  # the id round-trips exactly through escaping
    assert "<script>" not in text
    assert "HTTP 500 from the model service\ufffd <retry>" in cases(root)["pos-error"].find("system-out").text


def test_a_gate_only_run_skips_negatives(report, tmp_path):
    rows = [r.model_copy(update={"answer": None, "refused": False, "refused_by": None, "markers": [],
                                 "citations": [], "hallucinated": [], "error": None}) for r in report.rows]
    gate_only = rescore(report.model_copy(update={"gate_only": True, "rows": rows}))
    by_name = cases(parse(gate_only, tmp_path))
    assert by_name["neg-answered"].find("skipped") is not None
    assert by_name["neg-refused"].find("skipped") is not None
    assert "not-retrieved" in by_name["pos-miss"].find("system-out").text


def test_write_junit_is_atomic(report, tmp_path):
    target = tmp_path / "out" / "junit.xml"
    write_readout(prepare_readout(report, reports_dir=tmp_path), junit=target)
    ET.parse(target)
    assert [p.name for p in target.parent.iterdir()] == ["junit.xml"]


# Regression: a failing 0.7996 against '>= 0.8' printed as 0.800 in the failure message.
def test_a_failed_gate_message_shows_the_value_below_its_threshold(report, tmp_path):
    gate = GateResult(metric="recall@8", op=">=", threshold=0.8, value=0.7996, passed=False)
    failure = cases(parse(report.model_copy(update={"gates": [gate]}), tmp_path))["gate:recall@8"].find("failure")
    assert failure.get("message") == "recall@8 >= 0.8 failed: value 0.7996"
