"""Answers in the HTML report read as Markdown: escaped, code blocks kept, admonition titles dropped.

The unit tests pin the fragment; the browser tests open a whole report in headless
Chromium and read what a person sees (element text, what ran, what links go where).
"""

from __future__ import annotations

import re
import time

import pytest

from docpilot.readout.answer_markup import render_answer
from docpilot.readout.durations import format_duration
from docpilot.readout.files import write_readout
from docpilot.readout.outcomes import prepare_readout
from docpilot.readout.svg import histogram
from docpilot.reports.report import load_report, rescore
from tests.conftest import DATA

SMALL = DATA / "reports" / "small.json"
LINKS = {"1": "https://docs.example.com/guide/auth#tokens", "2": "https://docs.example.com/index"}
PRIMED = {"guide/auth#tokens", "index#"}

# An answer as a model writes one: every construct the report renders, and some that must stay text.
ANSWER = """\
!!! tip
    Use the **client** with *care* and `httpx.Client()` [1].

Tip Use a token, as [IPython](https://ipython.org/) does [2] [9].

```python
items = [0, 1]
print(items[0])  # <script>window.__pwned=7</script>
```

- first **step**
- second step,
  wrapped
1. one
2. two

Click [here](javascript:window.__pwned=8) or <img src=x onerror="window.__pwned=9">.
"""


def test_the_fragment_escapes_text_and_renders_the_constructs():
    fragment = render_answer(ANSWER, LINKS, PRIMED)
    assert "<p>Use the <strong>client</strong> with <em>care</em> and <code>httpx.Client()</code> " \
           '<a class="cite" href="https://docs.example.com/guide/auth#tokens">[1]</a>.</p>' in fragment
    # The run-together admonition title is gone, the link kept, the invented [9] left out.
    assert '<p>Use a token, as <a href="https://ipython.org/">IPython</a> does ' \
           '<a class="cite" href="https://docs.example.com/index">[2]</a>.</p>' in fragment
    assert "Tip" not in fragment and "[9]" not in fragment
    assert ('<pre><code class="language-python">items = [0, 1]\nprint(items[0])  '
            "# &lt;script&gt;window.__pwned=7&lt;/script&gt;</code></pre>") in fragment
    assert "<ul><li>first <strong>step</strong></li><li>second step, wrapped</li></ul>" in fragment
    assert "<ol><li>one</li><li>two</li></ol>" in fragment
    assert "javascript:" not in fragment  # the link's words stay, its address goes
    assert '<p>Click here or &lt;img src=x onerror=&quot;window.__pwned=9&quot;&gt;.</p>' in fragment


def test_brackets_that_are_no_citation_stay_as_written():
    assert render_answer("Use a[b] and [guide/auth#tokens] here.", LINKS, PRIMED) == \
        "<p>Use a[b] and [guide/auth#tokens] here.</p>"
    assert render_answer("Note that tips stay.", LINKS, PRIMED) == "<p>Note that tips stay.</p>"


def test_unclosed_emphasis_costs_time_linear_in_its_length():
    # Regression guard: untrusted answers must not make the page slow to write.
    hostile = "**a " * 20_000 + "`" * 5_000 + "[" * 20_000 + "_x " * 20_000
    start = time.perf_counter()
    fragment = render_answer(hostile, LINKS, PRIMED)
    assert time.perf_counter() - start < 2.0
    assert "<script" not in fragment


@pytest.mark.parametrize(("ms", "shown"), [(0.42, "0.42 ms"), (4.06, "4.06 ms"), (112.4, "112 ms"),
                                           (1250, "1.25 s"), (11246.1, "11.2 s"), (123456, "123 s"),
                                           (None, "n/a")])
def test_times_read_in_ms_and_s(ms, shown):
    assert format_duration(ms) == shown


def test_histogram_labels_say_ms_and_s_never_k():
    plot = histogram([11246.1] * 5 + [300.0], title="turn latency")
    assert ">p50 11.2 s<" in plot and ">p95 11.2 s<" in plot
    assert "11.2461k" not in plot and "k<" not in plot
    assert ">200 ms<" in plot or ">500 ms<" in plot


@pytest.fixture
def page(browser, tmp_path):
    report = load_report(SMALL)
    rows = [r.model_copy(update={"answer": ANSWER, "latency_ms": 11246.1}) if r.id == "pos-invented" else r
            for r in report.rows]
    report = rescore(report.model_copy(update={"rows": rows}))
    path = write_readout(prepare_readout(report, reports_dir=tmp_path / "reports"), html=tmp_path / "r.html")["html"]
    tab = browser.new_page()
    tab.set_viewport(1280, 900)
    tab.goto(path.as_uri())
    yield tab
    tab.close()


def test_in_a_browser_the_answer_reads_as_markdown(page):
    panel = "document.querySelector('#rec-pos-invented .panel')"
    code = page.evaluate(f"{panel}.querySelector('pre code').textContent")
    assert code == "items = [0, 1]\nprint(items[0])  # <script>window.__pwned=7</script>"
    # The fence keeps its lines on the screen too, not run into one.
    assert page.evaluate(f"{panel}.querySelector('pre').getClientRects()[0].height") > 30
    assert page.evaluate(f"Array.from({panel}.querySelectorAll('strong')).map(e => e.textContent)") == \
        ["client", "step"]
    assert page.evaluate(f"{panel}.querySelector('em').textContent") == "care"
    assert page.evaluate(f"{panel}.querySelectorAll('ul > li').length") == 2
    assert page.evaluate(f"{panel}.querySelectorAll('ol:not(.sources) > li').length") == 2
    text = page.evaluate(f"{panel}.innerText")
    assert "Tip" not in text and "**" not in text and "```" not in text
    links = page.evaluate(f"Array.from({panel}.querySelectorAll('p a')).map(a => a.getAttribute('href'))")
    assert "https://ipython.org/" in links and not any(link.startswith("javascript") for link in links)


def test_in_a_browser_nothing_from_the_answer_runs(page):
    assert page.evaluate("window.__pwned === undefined") is True
    assert page.evaluate("document.querySelectorAll('.panel img, .panel script').length") == 0
    assert page.errors() == []


def test_in_a_browser_times_read_in_ms_and_s(page):
    cells = page.evaluate("Array.from(document.querySelectorAll('#records td.num')).map(td => td.textContent)")
    assert "11.2 s" in cells
    labels = page.evaluate("Array.from(document.querySelectorAll('svg.plot text')).map(t => t.textContent)")
    assert not any(re.search(r"\dk$", label) for label in labels)  # no `11.2461k`
    assert any(label.startswith("p95 ") and label.endswith(" s") for label in labels)
    # Regression: with units, the rightmost tick (`20 s`) ran past the plot's edge and was cut off.
    inside = ("Array.from(document.querySelectorAll('svg.plot text.tick')).every((t) => {"
              "const b = t.getBBox(); return b.x >= 0 && b.x + b.width <= 440; })")
    assert page.evaluate(inside) is True
