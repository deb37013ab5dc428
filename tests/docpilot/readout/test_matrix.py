"""The readable forms of a run of several variants: the HTML matrix (in headless Chromium), JUnit, Markdown
(docpilot/readout/matrix.py, junit.py, markdown.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from docpilot.config.variants import Variant
from docpilot.readout.files import write_outputs
from docpilot.readout.markdown import render_markdown_variants
from docpilot.readout.matrix import render_matrix_html
from docpilot.reports.report import rescore
from docpilot.reports.variants import join_variants
from docpilot.schema import Report, Row
from tests.support.repeated_variants import repeated_variants

INJECTED = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def _row(i: int, hit: bool, answer: str) -> Row:
    return Row(id=f"q{i}", kind="positive", split="dev", question=f"How do I do thing {i}?", gold=["a#x"],
               tags=["cli"] if i % 2 else ["metrics"], retrieved=["a#x"] if hit else ["b#y"],
               primed=["a#x"] if hit else ["b#y"], answer=answer, gold_answer=answer, citations=["a#x"] if hit else [],
               markers=["1"] if hit else [], latency_ms=10.0 + i, first_token_ms=5.0)


def _report(hits: list[bool], prefix: str) -> Report:
    rows = [_row(i, hit, f"{prefix} answer {i}" + (INJECTED if i == 0 else "")) for i, hit in enumerate(hits)]
    return rescore(Report(run_id="r", created_at="2026-12-01T00:00:00+00:00", config={"gates": {}},
                          fingerprints={"model": "m", "config": "c"}, rows=rows, summary={}, gates=[],
                          verdict="pass"))


@pytest.fixture
def joined() -> Report:
    hits = [True, True, True, True, False, False]
    return join_variants([(Variant("k5"), _report(hits, "five")), (Variant("k3"), _report(hits[:3] + [False] * 3, "three"))])


def test_junit_has_one_suite_per_variant(joined, tmp_path):
    path = write_outputs(joined, junit=tmp_path / "junit.xml")["junit"]
    root = ET.parse(path).getroot()
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["docpilot.golden.all.k5", "docpilot.golden.all.k3"]
    records_and_gates = 2 * (6 + len(joined.variants[0].gates))
    assert root.get("tests") == str(sum(int(s.get("tests")) for s in suites)) == str(records_and_gates)
    assert {c.get("classname") for c in suites[1].findall("testcase")} == {"docpilot.golden.dev.k3",  # records
                                                                           "docpilot.golden.all.k3"}  # gates


def test_markdown_is_a_matrix_table(joined, tmp_path):
    text = write_outputs(joined, markdown=tmp_path / "summary.md")["markdown"].read_text()
    assert "| metric | k5 | k3 |" in text
    # Every record's gold is on one page, so each interval by page is the value itself.
    assert r"| recall@8 | 0.667 \[0.667, 0.667\] | 0.500 \[0.500, 0.500\] |" in text
    assert "| verdict | pass | pass |" in text and "Stability" not in text
    assert "baseline `k5`" in text and "Holm-corrected" in text


@pytest.fixture
def page(browser, joined, tmp_path):
    path = write_outputs(joined, html=tmp_path / "matrix.html")["html"]
    opened = browser.new_page()
    opened.set_viewport(1280, 900)
    opened.goto(path.as_uri())
    yield opened
    opened.close()


VISIBLE = "Array.from(document.querySelectorAll('#matrix tbody tr.q')).filter(r => !r.hidden).length"


def test_in_a_browser_each_question_is_a_row_with_a_cell_per_variant(page):
    assert page.evaluate("document.title") == f"DocPilot variants {page.evaluate('document.title').split()[2]} — pass"
    assert page.evaluate("Array.from(document.querySelectorAll('#matrix thead th')).map(h => h.textContent)") == [
        "id", "question", "k5", "k3"]
    cells = page.evaluate("Array.from(document.querySelectorAll('tr.q[data-id=q3] td.cell')).map(c => c.className)")
    assert cells == ["cell o-pass", "cell o-fail"]  # q3: found by k5, missed by k3
    assert page.evaluate(VISIBLE) == 6
    assert page.evaluate("typeof window.__pwned") == "undefined"  # answers are text, never markup
    assert page.errors() == []


def test_in_a_browser_a_row_opens_to_the_answers_side_by_side(page):
    assert page.evaluate("document.querySelector('tr.q[data-id=q3]').nextElementSibling.hidden") is True
    page.evaluate("document.querySelector('tr.q[data-id=q3]').click()")
    answers = page.evaluate("Array.from(document.querySelector('tr.q[data-id=q3]').nextElementSibling"
                            ".querySelectorAll('.answer')).map(a => a.innerText)")
    assert len(answers) == 2 and "five answer 3" in answers[0] and "three answer 3" in answers[1]
    text = page.evaluate("document.querySelector('tr.q[data-id=q0]').nextElementSibling.innerText")
    assert "<script>" in text  # shown as text


def test_in_a_browser_the_filters_keep_a_tag_and_the_questions_the_variants_disagree_on(page):
    page.evaluate("var d = document.getElementById('f-disagree'); d.checked = true;"
                  "d.dispatchEvent(new Event('change'))")
    assert page.evaluate(VISIBLE) == 1  # only q3 differs
    page.evaluate("var d = document.getElementById('f-disagree'); d.checked = false;"
                  "d.dispatchEvent(new Event('change'));"
                  "var t = document.getElementById('f-tag'); t.value = 'cli'; t.dispatchEvent(new Event('change'))")
    assert page.evaluate(VISIBLE) == 3
    assert page.evaluate("document.getElementById('f-count').textContent") == "3 of 6 questions shown"
    assert page.errors() == []


@pytest.mark.slow
def test_docpilot_report_writes_the_matrix_forms_of_a_stored_run_of_several(joined, tmp_path):
    import os
    import subprocess
    import sys

    from docpilot.reports.report import write_report
    from tests.conftest import ROOT

    path = write_report(joined, tmp_path / "run.json")
    result = subprocess.run([sys.executable, "-m", "docpilot", "report", str(path), "--junit", str(tmp_path / "j.xml"),
                             "--markdown", "-"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert "| metric | k5 | k3 |" in result.stdout
    assert len(ET.parse(tmp_path / "j.xml").getroot().findall("testsuite")) == 2


def test_with_repeats_each_variant_shows_its_intervals_and_its_flaky_records():
    report = repeated_variants()
    base, shaky = report.variants
    text = render_markdown_variants(report)
    assert r"| answer\_f1 | 1.000 \[1.000, 1.000\] | 0.917 \[0.833, 1.000\] |" in text
    assert "- `shaky`: samples: 3 per record, 8 records; flip rate 0.250 (2 flaky), pass^3 0.750; flaky: `q1`, `q2`" in text
    assert "- `base`: samples: 3 per record, 8 records; flip rate 0.000 (0 flaky), pass^3 1.000\n" in text
    assert "2 variants, golden set, all split, 8 records" in text  # records, not samples
    page = render_matrix_html(report)
    assert "<td class=\"num\">0.917 [0.833, 1.000]</td>" in page
    assert (f"{shaky.summary['answer_f1']:.3f} [{shaky.intervals['answer_f1'][0]:.3f}, "
            f"{shaky.intervals['answer_f1'][1]:.3f}]") == "0.917 [0.833, 1.000]"
    stability = page[page.index('<section id="stability">'):page.index("<h2>Questions</h2>")]
    assert "<h3>shaky</h3><p>samples: 3 per record, 8 records; flip rate 0.250 (2 flaky), pass^3 0.750</p>" in stability
    assert '<li class="mono">q1: 2 of 3 samples passed, answer F1 0.667 ± 0.577</li>' in stability
    assert stability.count("<li") == 2 and base.stability.flaky == []
