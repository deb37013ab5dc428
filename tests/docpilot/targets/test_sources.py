"""Where a target's returned sources land in the docs: sections, pages, and what the docs lack.

The resolver is checked on the pipeline docs by hand; then runs against the shapes server
whose sources name pages and pages outside the docs, which once stopped a whole run after
every question had been asked (`no section 'guide/auth#' in the corpus`), must write their
report with page-level retrieval figures that pytrec_eval agrees with.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from docpilot.config.target import SourceMapping
from docpilot.corpus.pages import load_corpus
from docpilot.targets.sources import SourceName, SourceResolver, source_name
from tests.docpilot.targets.test_ask import DOCS, RECORDS, SHAPES, _eval, _trec
from tests.support.assistant_shapes import KEY, Script, Scripted, serve_shapes


@pytest.fixture(scope="module")
def resolver() -> SourceResolver:
    return SourceResolver(load_corpus(DOCS))


@pytest.mark.parametrize(("mapped", "heading", "expected"), [
    ("guide/auth#tokens", (), ("guide/auth#tokens", "section")),
    ("guide/auth#", (), ("guide/auth", "page")),  # the page has no text above its first heading
    ("guide/auth#no-such-anchor", (), ("guide/auth#no-such-anchor", "outside")),
    ("blog/post#", (), ("blog/post#", "outside")),
    ("blog/post#intro", (), ("blog/post#intro", "outside")),
    ("guide/auth#", ("Authentication", "Tokens"), ("guide/auth#tokens", "section")),  # explicit { #tokens }
    ("guide/auth#", ("Rotating `tokens`",), ("guide/auth#rotating-tokens", "section")),  # markup dropped
    ("guide/auth#", ("Authentication",), ("guide/auth#authentication", "section")),
    ("guide/auth#", ("Refresh tokens",), ("guide/auth#refresh-tokens", "outside")),
])
def test_a_source_lands_on_a_section_a_page_or_outside_the_docs(resolver, mapped, heading, expected):
    found = resolver.resolve(SourceName(mapped=mapped, given=mapped, heading=heading))
    assert (found.id, found.level) == expected


def test_under_a_heading_mapping_a_source_under_no_heading_is_the_page_s_opening_text(tmp_path):
    (tmp_path / "faq.md").write_text("Answers to common questions.\n\n## Install\n\nA.\n")
    resolver = SourceResolver(load_corpus(tmp_path))
    assert resolver.resolve(SourceName("faq#", "faq.md", (), by_heading=True)).id == "faq#"
    assert resolver.resolve(SourceName("faq#", "faq.md", ())).id == "faq"  # a URL without an anchor: the page


def test_repeated_headings_are_told_apart_by_their_path_else_taken_in_page_order(tmp_path):
    (tmp_path / "faq.md").write_text("# FAQ\n\n## Linux\n\n### Install\n\nA.\n\n## macOS\n\n### Install\n\nB.\n")
    resolver = SourceResolver(load_corpus(tmp_path))
    assert resolver.resolve(SourceName("faq#", "faq.md", ("FAQ", "macOS", "Install"))).id == "faq#install-1"
    assert resolver.resolve(SourceName("faq#", "faq.md", ("FAQ", "Linux", "Install"))).id == "faq#install"
    assert resolver.resolve(SourceName("faq#", "faq.md", ("Install",))).id == "faq#install"


def test_a_heading_mapping_reads_a_langchain_document_s_metadata():
    mapping = SourceMapping(prefix="docs/", heading='[metadata."Header 1", metadata."Header 2"]')
    document = {"metadata": {"source": "docs/guide/auth.md", "Header 1": "Authentication", "Header 2": "Tokens"},
                "page_content": "Acme authenticates with an API token."}
    assert source_name(document, "metadata.source", mapping) == SourceName(
        "guide/auth#", "docs/guide/auth.md", ("Authentication", "Tokens"), by_heading=True)
    preamble = {"metadata": {"source": "docs/guide/auth.md"}}  # text above every heading carries none
    assert source_name(preamble, "metadata.source", mapping).heading == ()


def _page_script() -> Script:
    """Sources naming pages (no anchor), sections, and a page outside the docs, in a seeded mix."""
    shown = [
        ["guide/auth", "blog/launch", "index"], ["guide/deploy#rollback", "index"], ["blog/launch", "index#acme-cli"],
        ["guide/auth"], ["guide/deploy", "guide/deploy#rollback"], ["guide/auth#tokens", "index#install"],
        ["guide/deploy#deploy-a-site", "guide/auth"], ["blog/launch"],
    ]
    answers = {}
    for record, sources in zip(RECORDS, shown + [[], []], strict=True):
        answer = f"{record['gold_answer']} See [1]." if "gold" in record else "REFUSE: not-answerable"
        answers[record["question"]] = Scripted(answer, sources)
    return Script(answers)


@pytest.fixture(scope="module")
def page_served() -> Iterator[tuple[str, Script]]:
    script = _page_script()
    with serve_shapes(script) as base:
        yield base, script


def _page_level_trec(rows: list[dict]) -> dict[str, dict[str, float]]:
    """pytrec_eval over pages: gold and ranking both taken to the page they name, each page once."""
    paged = []
    for row in rows:
        pages = list(dict.fromkeys(s.partition("#")[0] for s in row["retrieved"][:8]))
        gold = list(dict.fromkeys(g.partition("#")[0] for g in row["gold"]))
        paged.append({**row, "retrieved": pages, "gold": gold})
    return _trec(paged)


def _project(tmp_path: Path, base: str, *, records: list = RECORDS, shape: dict | None = None, name: str = "acme",
             **extra: object) -> Path:
    """A config over the pipeline docs naming one target (the shapes server's JSON one unless ``shape``)."""
    golden = tmp_path / "golden.yaml"
    golden.write_text(yaml.safe_dump(records))
    target = json.loads(json.dumps(shape or SHAPES["json"]).replace("{base}", base))
    config = tmp_path / "docpilot.yaml"
    config.write_text(yaml.safe_dump({
        "corpus": {"docs": str(DOCS)}, "golden": str(golden), "cache_dir": str(tmp_path / "cache"),
        "reports_dir": str(tmp_path / "reports"), "targets": {name: target}, **extra}))
    return config


def test_a_target_naming_pages_and_pages_outside_the_docs_is_read_at_page_level(page_served, tmp_path, monkeypatch):
    # Regression: a source naming a page with no text above its first heading, or a page outside the
    # docs, raised in the render step after every question had been asked, and no report was written.
    monkeypatch.setenv("SHAPES_KEY", KEY)
    base, _ = page_served
    config = _project(tmp_path, base)
    out, html = tmp_path / "run.json", tmp_path / "run.html"
    result = _eval("--config", str(config), "--target", "acme", "--out", str(out), "--html", str(html))
    assert result.exit_code in (0, 1), result.output
    report = json.loads(out.read_text())
    rows = {r["id"]: r for r in report["rows"]}
    assert rows["q0"]["retrieved"] == ["guide/auth", "blog/launch#", "index"]
    assert rows["q0"]["outside_docs"] == ["blog/launch#"]
    assert report["summary"]["sources_outside_docs"] == 3
    positives = [r for r in report["rows"] if r["kind"] == "positive"]
    trec = _page_level_trec(positives)
    for name, ours in (("recall@1", "recall_1"), ("recall@8", "recall_8"), ("mrr", "recip_rank"),
                       ("ndcg@8", "ndcg_cut_8")):
        expected = sum(trec[r["id"]][ours] for r in positives) / len(positives)
        assert report["summary"][name] == pytest.approx(expected, abs=1e-12), name
    assert "read at page level for 5 of 8 positives" in result.output
    assert "3 returned sources name nothing in the docs (sources_outside_docs), in q0, q2, q7" in result.output
    assert "blog/launch" in html.read_text()
    for command in (["score", str(out)], ["report", str(out)]):
        again = _eval_command(*command)
        assert again.exit_code in (0, 1), again.output


def _eval_command(*args: str):
    from click.testing import CliRunner

    from docpilot.cli import main

    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_golden_check_names_the_granularity_and_the_gold_a_run_can_match(page_served, tmp_path, monkeypatch):
    monkeypatch.setenv("SHAPES_KEY", KEY)
    base, _ = page_served
    config = _project(tmp_path, base)
    result = _eval_command("golden", "check", "--config", str(config), "--target", "acme", "--json")
    assert result.exit_code == 0, result.output
    sample = json.loads(result.output[result.output.index("{"):])["target"]
    assert sample["granularity"]["level"] == "page"
    assert sample["granularity"]["sources_outside_docs"] == 1
    entries = [g for r in RECORDS for g in r.get("gold", [])]
    assert sample["granularity"]["gold_entries"] == len(entries) == sample["granularity"]["reachable"]
    assert [s["names"] for s in sample["sources"]] == ["a page", "outside the docs", "a page"]
    shown = _eval_command("golden", "check", "--config", str(config), "--target", "acme")
    assert "granularity: pages" in shown.output and "1 sources name nothing in the docs" in shown.output



VENDOR = {"url": "{base}/v1/stream", "headers": {"X-Api-Key": "${SHAPES_KEY}"}, "body": {"query": "{question}"},
          "reply": {"kind": "sse", "delta_event": "delta", "answer": "delta", "sources_event": "sources",
                    "sources": "sources", "source_id": "url", "end_event": "end"},
          "source_ids": {"base_url": "https://docs.example/"}}


def test_a_vendor_s_sse_api_configured_from_the_docs_gives_an_oracle_s_numbers(page_served, tmp_path, monkeypatch):
    monkeypatch.setenv("SHAPES_KEY", KEY)
    base, script = page_served
    config = _project(tmp_path, base, shape=VENDOR, name="vendor", model={"concurrency": 4})
    out = tmp_path / "run.json"
    result = _eval("--config", str(config), "--target", "vendor", "--out", str(out))
    assert result.exit_code in (0, 1), result.output
    report = json.loads(out.read_text())
    positives = [r for r in report["rows"] if r["kind"] == "positive"]
    for row in positives:
        shown = script.shown[row["question"]]
        # a page of the docs is its page id; the blog, outside them, keeps the '#' its URL mapped to
        assert row["retrieved"] == [s + "#" if s == "blog/launch" else s for s in shown][:8]
    trec = _page_level_trec(positives)
    for name, ours in (("recall@8", "recall_8"), ("mrr", "recip_rank")):
        expected = sum(trec[r["id"]][ours] for r in positives) / len(positives)
        assert report["summary"][name] == pytest.approx(expected, abs=1e-12), name
    answered = [r for r in report["rows"] if r["answer"] and not r["refused"]]
    assert answered and all(r["first_token_ms"] is not None and r["first_token_ms"] <= r["latency_ms"]
                            for r in answered)
    assert all(r["stages_ms"] == {"search": 4.2, "llm": 31.5} for r in report["rows"])
    monkeypatch.setenv("SHAPES_KEY", "a-wrong-key")
    before = script.vendor_requests
    wrong = _eval("--config", str(config), "--target", "vendor", "--no-cache")
    assert wrong.exit_code == 2 and "HTTP 401" in wrong.output
    assert script.vendor_requests - before <= 4  # model.concurrency


def test_in_a_browser_a_source_outside_the_docs_links_where_the_target_said_and_a_page_to_the_docs(
        page_served, tmp_path, monkeypatch, browser):
    monkeypatch.setenv("SHAPES_KEY", KEY)
    base, _ = page_served
    config = _project(tmp_path, base, records=RECORDS[:3])
    data = yaml.safe_load(config.read_text())
    data["corpus"]["base_url"] = "https://docs.acme.test/"
    config.write_text(yaml.safe_dump(data))
    html = tmp_path / "run.html"
    result = _eval("--config", str(config), "--target", "acme", "--html", str(html), "--out", str(tmp_path / "r.json"))
    assert result.exit_code in (0, 1), result.output
    row = json.loads((tmp_path / "r.json").read_text())["rows"][0]
    assert row["outside_links"] == {"blog/launch#": "https://docs.acme.test/blog/launch.html"}
    page = browser.new_page()
    try:
        page.goto(html.as_uri())
        hrefs = page.evaluate("Array.from(document.querySelectorAll('.panel a')).map(a => a.href)")
        assert "https://docs.acme.test/blog/launch.html" in hrefs  # where the target said it lives
        assert "https://docs.acme.test/guide/auth" in hrefs  # a page of the docs, linked as the docs link it
        assert page.errors() == []
    finally:
        page.close()


def test_a_heading_path_that_is_no_jmespath_is_refused_naming_it():
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as raised:
        SourceMapping(heading='metadata."Header 2')
    assert "source_ids.heading" in str(raised.value) and "is not a JMESPath expression" in str(raised.value)
