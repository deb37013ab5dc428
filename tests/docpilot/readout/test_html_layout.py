"""The HTML report's layout, read in a real headless Chromium: headings, plots, answers, tables.

The report is the small fixture (see test_html_report.py) with tags on its rows and an
answer that carries a Markdown code span.
"""

from __future__ import annotations

import re

import pytest

from docpilot.readout.files import write_readout
from docpilot.readout.html import render_html
from docpilot.readout.outcomes import prepare_readout
from docpilot.readout.svg import histogram
from docpilot.reports.report import load_report, rescore
from tests.conftest import DATA

SMALL = DATA / "reports" / "small.json"

# Every (p50/p95 label, bar) pair of every histogram whose boxes intersect.
OVERLAPS = """
(() => {
  const found = [];
  document.querySelectorAll('svg.plot').forEach((svg) => {
    const bars = Array.from(svg.querySelectorAll('rect.bar')).filter((b) => b.getBBox().height > 0);
    svg.querySelectorAll('text.label').forEach((label) => {
      const a = label.getBBox();
      bars.forEach((bar) => {
        const b = bar.getBBox();
        if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height) {
          found.push(label.textContent);
        }
      });
    });
  });
  return found;
})()
"""


@pytest.fixture
def report():
    report = load_report(SMALL)
    rows = [r.model_copy(update={
        "tags": ["auth"] if any("auth" in g for g in r.gold) else ["misc"],
        "answer": f"{r.answer} Sign in with `acme login` first." if r.id == "pos-invented" else r.answer,
        "overlap": (0.3 if r.id == "pos-miss" else 0.9) if r.kind == "positive" else None,
    }) for r in report.rows]
    return rescore(report.model_copy(update={"rows": rows}))


@pytest.fixture
def page_html(report, tmp_path):
    return render_html(prepare_readout(report, reports_dir=tmp_path / "reports"))


def test_each_family_has_one_heading_and_errors_sits_under_answer(page_html):
    # Regression: a second "answer" heading held only `errors`, listed after the citation metrics.
    families = re.findall(r'<tr class="family"><th colspan="\d">(\w+)</th></tr>', page_html)
    assert families == ["retrieval", "answer", "citations", "refusals", "latency", "usage"]
    answer = page_html.split('<th colspan="5">answer</th>')[1].split('<tr class="family">')[0]
    assert '<td class="mono">errors</td>' in answer


def test_metrics_the_set_cannot_produce_are_left_off_with_one_line(page_html):
    assert '<td class="mono">attack_success_rate</td>' not in page_html
    assert ('<p class="note" id="left-off">left off, as a golden run has no attack probes to measure them on: '
            "attack_success_rate, refusal_accuracy, safe_answer_rate.</p>") in page_html


def test_the_by_tag_table_holds_each_slice(page_html, report):
    table = page_html.split('<table id="slices">')[1].split("</table>")[0]
    auth = report.slices["auth"]
    assert f'<tr><td>auth</td><td class="num">{auth.records}</td><td class="num">' \
           f'{auth.summary["recall@8"]:.3f}</td>' in table


def test_the_by_overlap_band_table_holds_each_band(page_html, report):
    table = page_html.split('<table id="bands">')[1].split("</table>")[0]
    assert list(report.bands) == ["low", "high"]
    for name, piece in report.bands.items():
        assert f'<tr><td>{name}</td><td class="num">{piece.records}</td><td class="num">' \
               f'{piece.summary["recall@8"]:.3f}</td>' in table


def test_answers_show_code_spans_as_code(page_html):
    block = page_html.split('id="rec-pos-invented"')[1].split("</details>")[0]
    assert "Sign in with <code>acme login</code> first." in block and "`acme login`" not in block


def test_the_records_table_shows_the_question(page_html):
    assert '<td class="question">How do I deploy?</td>' in page_html
    assert '<td class="question">What is &lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot;?' in page_html


def test_failing_records_show_the_expected_and_detected_languages(report, tmp_path):
    rows = [r.model_copy(update={"question_language": "en", "answer_language": "de"}) if r.id == "pos-miss" else r
            for r in report.rows]
    page = render_html(prepare_readout(report.model_copy(update={"rows": rows}), reports_dir=tmp_path))
    block = page.split('id="rec-pos-miss"')[1].split("</details>")[0]
    assert "<dt>language</dt><dd>expected en; detected in the question en, in the answer de</dd>" in block


def _open(browser, html_path):
    page = browser.new_page()
    page.set_viewport(1280, 900)
    page.goto(html_path.as_uri())
    return page


def test_in_a_browser_no_percentile_label_overlaps_a_bar(browser, report, tmp_path):
    # Regression: the p50 label was drawn across the tallest bar.
    path = write_readout(prepare_readout(report, reports_dir=tmp_path / "reports"), html=tmp_path / "r.html")["html"]
    page = _open(browser, path)
    try:
        assert page.evaluate("document.querySelectorAll('svg.plot text.label').length") > 0
        assert page.evaluate(OVERLAPS) == []
        assert page.errors() == []
    finally:
        page.close()


def test_in_a_browser_labels_clear_the_bars_for_any_spread_of_times(browser, tmp_path):
    # One bar holding every value (the tallest possible), at the left, middle and right.
    plots = [histogram(values, title=f"h{i}") for i, values in enumerate(
        ([1.0] * 9 + [1000.0], [5.0] * 10, [3.0, 40.0, 40.0, 40.0, 40.0, 9000.0], [0.01] * 3 + [7.0] * 30))]
    path = tmp_path / "plots.html"
    path.write_text("<!DOCTYPE html><html><body>" + "".join(plots) + "</body></html>", encoding="utf-8")
    page = _open(browser, path)
    try:
        assert page.evaluate(OVERLAPS) == []
        inside = ("Array.from(document.querySelectorAll('text.label')).every((t) => {"
                  "const b = t.getBBox(); return b.x >= 0 && b.x + b.width <= 440; })")
        assert page.evaluate(inside) is True
    finally:
        page.close()


def test_in_a_browser_the_code_span_is_a_code_element(browser, report, tmp_path):
    path = write_readout(prepare_readout(report, reports_dir=tmp_path / "reports"), html=tmp_path / "r.html")["html"]
    page = _open(browser, path)
    try:
        assert page.evaluate("document.querySelector('#rec-pos-invented .panel code').textContent") == "acme login"
        heads = "Array.from(document.querySelectorAll('#records thead th')).map((th) => th.textContent)"
        assert page.evaluate(heads)[:2] == ["id", "question"]
    finally:
        page.close()


def test_a_run_of_some_records_says_which(report, tmp_path):
    from docpilot.readout.markdown import render_markdown
    from docpilot.schema import Selection

    chosen = report.model_copy(update={"selection": Selection(tags=["auth"], limit=3)})
    readout = prepare_readout(chosen, reports_dir=tmp_path)
    assert "<li>selection <b>--tag auth --limit 3</b></li>" in render_html(readout)
    assert "all split (--tag auth --limit 3), 8 records" in render_markdown(readout).splitlines()[0]
    assert "<li>selection" not in render_html(prepare_readout(report, reports_dir=tmp_path))
