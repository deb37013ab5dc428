"""The HTML report's trend section: the series' stored runs plotted, moves marked with their causes, in Chromium."""

from __future__ import annotations

from docpilot.history.index import INDEX_FILE, RunIndex
from docpilot.readout.files import write_readout
from docpilot.readout.html import render_html
from docpilot.readout.outcomes import prepare_readout
from docpilot.readout.svg import HEIGHT, WIDTH
from docpilot.reports.report import load_report
from tests.support.run_series import night_report, write_night

# Every text of every trend plot whose box leaves the plot's viewBox.
OUTSIDE = f"""
(() => {{
  const found = [];
  document.querySelectorAll('svg.trend text').forEach((text) => {{
    const b = text.getBBox();
    if (b.x < 0 || b.y < 0 || b.x + b.width > {WIDTH} || b.y + b.height > {HEIGHT}) found.push(text.textContent);
  }});
  return found;
}})()
"""


def _series(folder):
    """Eight nights: the docs change on night 3 and the model on night 6."""
    folder.mkdir(parents=True)
    paths = []
    for night in range(8):
        lost = {i: 4 for i in range(40) if i % 5 != 4} if night >= 6 else {}
        paths.append(write_night(folder, night_report(
            night, records=40, misses=frozenset(range(0, 40, 5)) if night >= 3 else frozenset(),
            pages_changed=(0,) if night >= 3 else (), model="extractive-v2" if night >= 6 else "extractive-v1",
            lost_words=lost)))
    RunIndex(folder).refresh()
    return paths


def test_the_trend_plots_each_headline_metric_with_the_moves_and_their_causes(tmp_path):
    paths = _series(tmp_path / "reports")
    readout = prepare_readout(load_report(paths[-1]), reports_dir=tmp_path / "reports")
    page = render_html(readout)
    section = page.split('<section id="trend">')[1].split("</section>")[0]
    assert section.count('<svg class="plot trend"') == len(readout.trend.metrics) >= 5
    recall = section.split("<figcaption>recall@8</figcaption>")[1].split("</svg>")[0]
    assert recall.count('class="move worse"') == 1 and ">corpus<title>" in recall
    assert "docs: pages changed: guide/page0" in recall
    f1 = section.split("<figcaption>answer_f1</figcaption>")[1].split("</svg>")[0]
    assert ">model, config<title>" in f1 and "model extractive/extractive-v1 → extractive/extractive-v2" in f1


def test_an_old_report_shows_the_series_up_to_it(tmp_path):
    paths = _series(tmp_path / "reports")
    readout = prepare_readout(load_report(paths[4]), reports_dir=tmp_path / "reports")
    assert [step.run.file for step in readout.trend.steps] == [p.name for p in paths[:5]]


def test_without_a_run_index_there_is_no_trend_and_none_is_made(tmp_path):
    folder = tmp_path / "copied"
    folder.mkdir()
    path = write_night(folder, night_report(0, records=10))
    page = render_html(prepare_readout(load_report(path), report_path=path))
    assert '<section id="trend">' not in page
    assert not (folder / INDEX_FILE).exists()


def test_in_a_browser_the_trend_draws_inside_its_plots(browser, tmp_path):
    paths = _series(tmp_path / "reports")
    readout = prepare_readout(load_report(paths[-1]), reports_dir=tmp_path / "reports")
    html_path = write_readout(readout, html=tmp_path / "r.html")["html"]
    page = browser.new_page()
    try:
        page.set_viewport(1280, 900)
        page.goto(html_path.as_uri())
        assert page.evaluate("document.querySelectorAll('#trend svg.trend').length") == len(readout.trend.metrics)
        assert page.evaluate("document.querySelectorAll('#trend g.move').length") >= 2
        assert page.evaluate("document.querySelector('#trend svg.trend path.line').getTotalLength()") > 100
        assert page.evaluate(OUTSIDE) == []
        assert page.evaluate("getComputedStyle(document.querySelector('#trend circle.dot.worse')).fill") \
            == "rgb(198, 40, 40)"
        assert page.errors() == []
    finally:
        page.close()


def test_a_flat_series_names_only_its_one_value(tmp_path):
    # Regression: a rate that never moved from 1.0 was drawn on an axis running up to 1.5.
    paths = _series(tmp_path / "reports")
    readout = prepare_readout(load_report(paths[-1]), reports_dir=tmp_path / "reports")
    page = render_html(readout)
    flat = page.split("<figcaption>negatives_caught</figcaption>")[1].split("</svg>")[0]
    assert ">1.000</text>" in flat and "1.500" not in flat and "0.500" not in flat
