"""The HTML report: self-contained, escaped, and read in a real headless browser.

The fixture report (tests/data/reports/small.json) holds eight hand-made rows: a
clean hit, a positive whose gold was not retrieved, a model-refused positive, an
answered negative, an answer with an invented marker (breaking the built-in gate),
a record whose id, question, answer and reasoning carry script injections, an
errored turn and a correctly refused negative. A user gate (recall@8 >= 0.9) fails.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import struct
import subprocess
import sys

import pytest

from docpilot.corpus.pages import section_url
from docpilot.errors import ReportError
from docpilot.readout.files import write_outputs, write_readout
from docpilot.readout.html import content_security_policy, render_html
from docpilot.readout.outcomes import prepare_readout
from docpilot.readout.svg import histogram, recall_curve
from docpilot.reports.report import load_report, rescore, write_report
from docpilot.schema import GateResult
from tests.conftest import DATA, ROOT

SMALL = DATA / "reports" / "small.json"
INJECTED_ID = 'x"><script>window.__pwned=3</script>'
FAILING = {"pos-miss", "pos-refused", "neg-answered", "pos-invented", INJECTED_ID, "pos-error"}


@pytest.fixture
def report():
    return load_report(SMALL)


@pytest.fixture
def readout(report, tmp_path):
    return prepare_readout(report, reports_dir=tmp_path / "reports")


@pytest.fixture
def page_html(readout):
    return render_html(readout)


# --- content and escaping ---------------------------------------------------------


def test_the_page_carries_the_run_header_verdict_and_gates(page_html, report):
    assert "<title>DocPilot report 20261130T120000Z-abc123 — fail</title>" in page_html
    assert '<span class="badge fail">FAIL</span>' in page_html
    for fact in ("2026-11-30T12:00:00+00:00", "golden", "inline", "6.1 s", "gate-only <b>no"):
        assert fact in page_html
    # the failed built-in gate links to the record that broke it
    assert re.search(r'<td><span class="bad">FAIL</span></td><td class="mono">hallucinated_citations == 0</td>'
                     r'.*?<a href="#rec-pos-invented">pos-invented</a>', page_html)
    assert '<td class="mono">recall@8 &gt;= 0.9</td>' in page_html


def test_the_scorecard_shows_each_value_with_its_n_and_wilson_bound(page_html, report):
    row = re.search(r"<tr><td class=\"mono\">over_refusal_answer</td>(.*?)</tr>", page_html).group(1)
    n = report.counts["over_refusal_answer"]
    bound = report.summary["over_refusal_answer_upper95"]
    assert f'<td class="num">{n}</td>' in row and f"≤ {bound:.3f}" in row
    assert "over_refusal_answer_upper95</td>" not in page_html  # shown beside its rate, not as a row
    recall = re.search(r"<tr><td class=\"mono\">recall@8</td>(.*?)</tr>", page_html).group(1)
    assert f"{report.summary['recall@8']:.3f}" in recall and "share of gold entries matched in the top 8" in recall


def test_every_model_and_golden_string_is_escaped(page_html):
    assert page_html.count("<script") == 1  # the page's own filter script, nothing else
    assert "window.__pwned" not in page_html.split("<script>")[1]
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page_html
    assert "onerror=&quot;window.__pwned=2&quot;" in page_html
    assert "onerror=" not in re.sub(r"onerror=&quot;", "", page_html)
    assert "<img" not in page_html and "<b>bold</b>" not in page_html
    assert "What is &lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot;?" in page_html
    # the injected record id is escaped as text and cleaned to a safe anchor
    assert "x&quot;&gt;&lt;script&gt;window.__pwned=3&lt;/script&gt;" in page_html
    assert 'id="rec-x-script-window.__pwned-3-script"' in page_html


def test_the_policy_allows_exactly_the_page_script(page_html):
    script = re.search(r"<script>(.*?)</script>", page_html, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    meta = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page_html).group(1)
    policy = html.unescape(meta)
    assert policy == content_security_policy()
    assert f"script-src 'sha256-{digest}'" in policy and "default-src 'none'" in policy
    assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]


def test_the_page_loads_nothing_from_the_network(page_html):
    assert not re.search(r"<[^>]*\ssrc=", page_html)
    assert re.findall(r"<link[^>]*>", page_html) == ['<link rel="icon" href="data:,">']
    assert "@import" not in page_html and "url(" not in page_html


def test_failing_records_get_details_with_cause_gold_hits_and_the_rendered_panel(page_html):
    block = re.search(r'<details class="record" id="rec-pos-invented" open>(.*?)</details>', page_html, re.S).group(1)
    assert "<b>hallucinated-citation</b> — markers [7] point at no primed source" in block
    assert "breaks the gate on <code>hallucinated_citations</code>" in block
    assert '<li class="gold"><code>guide/auth#tokens</code>' in block and "primed [1]" in block
    # the panel is the renderer's own: [1] links to the section, the invented [7] is gone
    assert '<a class="cite" href="https://docs.example.com/guide/auth#tokens">[1]</a>' in block
    assert "[7]" not in block.split('<div class="panel">')[1]
    assert 'href="https://docs.example.com/"' in page_html  # index# links to the base URL itself
    errored = re.search(r'id="rec-pos-error" open>(.*?)</details>', page_html, re.S).group(1)
    assert "HTTP 500 from the model service" in errored and "&lt;retry&gt;" in errored
    refused = re.search(r'id="rec-pos-refused" open>(.*?)</details>', page_html, re.S).group(1)
    assert '<div class="panel refused">' in refused
    assert 'id="rec-pos-hit"' not in page_html and 'id="rec-neg-refused"' not in page_html


def test_the_records_table_marks_failing_rows_for_the_filters(page_html, readout):
    rows = re.findall(r'<tr(?: class="failing")? data-kind="(\w+)" data-split="(\w+)" data-failing="([01])">',
                      page_html)
    assert len(rows) == 8
    assert sum(flag == "1" for _, _, flag in rows) == len(FAILING)
    assert {r.row.id for r in readout.failing} == FAILING
    assert "<th>cause</th>" in page_html and "<td>not-retrieved</td>" in page_html
    assert '<span class="bad">miss</span>' in page_html and '<span class="ok">hit</span> (1)' in page_html


def test_moves_come_from_the_previous_comparable_run_only(report, tmp_path):
    store = tmp_path / "reports"
    older = report.model_copy(update={"run_id": "20261129T080000Z-aaaaaa", "created_at": "2026-11-29T08:00:00+00:00",
                                      "summary": {**report.summary, "recall@8": 0.5, "latency_p50": 1.0}})
    other_split = report.model_copy(update={"run_id": "20261130T110000Z-bbbbbb", "split": "dev",
                                            "created_at": "2026-11-30T11:00:00+00:00"})
    later = report.model_copy(update={"run_id": "20261201T000000Z-cccccc", "created_at": "2026-12-01T00:00:00+00:00"})
    for r in (older, other_split, later, report):
        write_report(r, store / f"{r.run_id}.json")
    readout = prepare_readout(report, reports_dir=store)
    assert readout.previous_run == older.run_id
    assert readout.moves["recall@8"].previous == 0.5
    assert readout.moves["recall@8"].delta == pytest.approx(report.summary["recall@8"] - 0.5)
    assert readout.moves["recall@8"].change == "better" and readout.moves["latency_p50"].change == "worse"
    page = render_html(readout)
    assert f"Moves since run {older.run_id}" in page and "<th>move</th>" in page
    assert re.search(r"recall@8</td>.*?<td class=\"better\">\+0\.\d+ ↑ better</td>", page)


def test_a_gate_only_run_shows_no_model_and_no_first_token_data(report, tmp_path):
    rows = [r.model_copy(update={"answer": None, "refused": False, "refused_by": None, "markers": [],
                                 "citations": [], "hallucinated": [], "first_token_ms": None, "error": None})
            for r in report.rows]
    gate_only = rescore(report.model_copy(update={"gate_only": True, "rows": rows}))
    page = render_html(prepare_readout(gate_only, reports_dir=tmp_path))
    assert "no model ran (retrieval only)" in page
    first_token = page.split("Time to first token")[1].split("</figure>")[0]
    assert ">no data</text>" in first_token


# Regression: a failing 0.7996 against '>= 0.8' printed as 0.800.
def test_a_failed_gate_shows_the_value_below_its_threshold(report, tmp_path):
    gate = GateResult(metric="recall@8", op=">=", threshold=0.8, value=0.7996, passed=False)
    page = render_html(prepare_readout(report.model_copy(update={"gates": [gate]}), reports_dir=tmp_path))
    assert '<td class="mono">recall@8 &gt;= 0.8</td><td class="num">0.7996</td>' in page


def _plot_n(page: str, title: str) -> int:
    figure = page.split(title)[1].split("</figure>")[0]
    return int(re.search(r"n = (\d+)</text>", figure).group(1))


# Regression: the first-token plot drew every row with a first_token_ms (refusals and errored turns
# too), while first_token_p50/p95 are taken over the turns that painted answer text.
def test_each_time_plot_draws_the_population_its_percentiles_are_taken_over(report, tmp_path):
    # Rows as the row writer once wrote them: a refusal and an errored turn with a first-token time.
    rows = [r.model_copy(update={"first_token_ms": r.latency_ms}) if r.refused or r.error else r
            for r in report.rows]
    rescored = rescore(report.model_copy(update={"rows": rows}))
    page = render_html(prepare_readout(rescored, reports_dir=tmp_path))
    with_time = sum(1 for r in rows if r.first_token_ms is not None)
    assert _plot_n(page, "Time to first token") == rescored.counts["first_token_p50"] < with_time
    assert _plot_n(page, "Turn latency") == rescored.counts["latency_p50"]


def test_section_links_follow_the_corpus_rule():
    assert section_url("index#", "https://d.example/docs") == "https://d.example/docs/"
    assert section_url("index#intro", "https://d.example/docs/") == "https://d.example/docs/#intro"
    assert section_url("guide/auth#", "https://d.example/") == "https://d.example/guide/auth"
    assert section_url("guide/index-page#a", "https://d.example/") == "https://d.example/guide/index-page#a"


# --- plots ------------------------------------------------------------------------


def test_plots_say_no_data_instead_of_drawing_empty_axes():
    assert ">no data</text>" in recall_curve([(1, None), (3, None), (5, None), (8, None)])
    assert ">no data</text>" in histogram([], title="latency")


def test_the_histogram_counts_every_value_once():
    values = [0.0, 0.3, 1.0, 1.5, 4.0, 4.0, 19.9, 20.0, 250.0, 7_000.0]
    svg = histogram(values, title="t")
    counts = [int(c) for c in re.findall(r"<title>[^<]*: (\d+)</title></rect>", svg)]
    assert sum(counts) == len(values)
    assert "p50 4 ms" in svg and "p95 7 s" in svg  # nearest-rank: 5th and 10th of ten


def test_the_recall_curve_skips_a_null_point_and_labels_the_rest():
    svg = recall_curve([(1, 0.25), (3, None), (5, 0.75), (8, 1.0)])
    assert svg.count("<circle") == 3
    assert "recall@5 = 0.750" in svg and "recall@3" not in svg


# --- files ------------------------------------------------------------------------


def test_the_file_is_written_atomically_and_replaces_the_old_one(readout, tmp_path):
    target = tmp_path / "out" / "report.html"
    target.parent.mkdir()
    target.write_text("old")
    assert write_readout(readout, html=target) == {"html": target}
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]  # no temporary file left


def test_an_unwritable_target_is_a_report_error_and_leaves_nothing(readout, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(ReportError, match="cannot write"):
        write_readout(readout, html=blocker / "report.html")
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"]


def test_write_outputs_writes_each_asked_for_format(report, tmp_path):
    written = write_outputs(report, html=tmp_path / "r.html", junit=tmp_path / "r.xml",
                            reports_dir=tmp_path / "reports")
    assert written == {"html": tmp_path / "r.html", "junit": tmp_path / "r.xml"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "r.xml"]
    assert write_outputs(report) == {}


# --- in a real browser -------------------------------------------------------------


@pytest.fixture
def opened(browser, readout, tmp_path):
    path = write_readout(readout, html=tmp_path / "report.html")["html"]
    page = browser.new_page()
    page.set_viewport(1280, 900)
    page.goto(path.as_uri())
    yield page
    page.close()


def test_in_a_browser_injected_scripts_do_not_run_and_the_console_is_clean(opened):
    assert opened.evaluate("document.title") == "DocPilot report 20261130T120000Z-abc123 — fail"
    assert opened.evaluate("typeof window.__pwned") == "undefined"
    assert opened.evaluate("document.querySelectorAll('img').length") == 0
    text = opened.evaluate("document.getElementById('rec-pos-error').innerText")
    assert "HTTP 500 from the model service" in text
    assert opened.errors() == []


def test_in_a_browser_the_filters_hide_rows(opened):
    visible = "Array.from(document.querySelectorAll('#records tbody tr')).filter(r => !r.hidden).length"
    assert opened.evaluate("document.getElementById('filters').hidden") is False
    assert opened.evaluate(visible) == 8
    opened.evaluate("var c = document.getElementById('f-failing'); c.checked = true;"
                    "c.dispatchEvent(new Event('change'))")
    assert opened.evaluate(visible) == len(FAILING)
    opened.evaluate("var k = document.getElementById('f-kind'); k.value = 'negative';"
                    "k.dispatchEvent(new Event('change'))")
    assert opened.evaluate(visible) == 1  # neg-answered; neg-refused passes
    assert opened.evaluate("document.getElementById('f-count').textContent") == "1 of 8 records shown"
    assert opened.errors() == []


def test_without_javascript_every_row_shows_and_the_filters_stay_hidden(browser, readout, tmp_path):
    path = write_readout(readout, html=tmp_path / "report.html")["html"]
    page = browser.new_page()
    try:
        page.send("Emulation.setScriptExecutionDisabled", {"value": True})
        page.goto(path.as_uri())
        page.send("Emulation.setScriptExecutionDisabled", {"value": False})  # to ask the page questions
        assert page.evaluate("document.getElementById('filters').hidden") is True
        assert page.evaluate("document.querySelectorAll('#records tbody tr[hidden]').length") == 0
        assert page.evaluate("document.querySelectorAll('details.record[open]').length") == len(FAILING)
    finally:
        page.close()


def test_a_screenshot_of_the_report_is_a_real_png(opened, tmp_path):
    shot = opened.screenshot(tmp_path / "report.png")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 900)
    assert len(data) > 10_000  # a rendered page, not a blank image


def test_rendering_every_format_never_imports_prefect(tmp_path):
    # Regression guard for the core's dependency direction: readable reports are core code.
    code = (
        "import sys\n"
        "from docpilot.readout.files import write_outputs\n"
        "from docpilot.reports.report import load_report\n"
        f"write_outputs(load_report({str(SMALL)!r}), html={str(tmp_path / 'r.html')!r}, "
        f"junit={str(tmp_path / 'r.xml')!r}, markdown={str(tmp_path / 'r.md')!r}, reports_dir={str(tmp_path)!r})\n"
        "print('prefect' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "False"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "r.md", "r.xml"]
