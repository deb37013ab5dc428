"""Page links as the site generators serve the pages: an `index.md` or a Hugo `_index.md` is its folder."""

from __future__ import annotations

from docpilot.corpus.pages import load_corpus, section_url

BASE = "https://python-poetry.org/docs/"


# Regression: a Hugo `_index.md` linked to `/docs/cli/_index`, a page the site does not serve.
def test_an_index_or_a_hugo_section_page_links_to_its_folder(tmp_path):
    docs = tmp_path / "docs"
    (docs / "cli").mkdir(parents=True)
    (docs / "guide").mkdir()
    (docs / "_index.md").write_text("# Introduction\n\nPoetry is a tool for packaging.\n", encoding="utf-8")
    (docs / "cli" / "_index.md").write_text("# Commands\n\n## show\n\nList the packages.\n", encoding="utf-8")
    (docs / "guide" / "index.md").write_text("# Guide\n\n## Start\n\nBegin here.\n", encoding="utf-8")
    (docs / "faq.md").write_text("# FAQ\n\n## Why\n\nBecause.\n", encoding="utf-8")
    corpus = load_corpus(docs)
    urls = {section_id: corpus.section_url(section_id, BASE) for section_id in corpus.sections}
    cli = next(s for s in urls if s.endswith("#show"))
    assert urls[cli] == BASE + "cli/#show"
    assert urls["guide#start"] == BASE + "guide#start"
    assert urls["faq#why"] == BASE + "faq#why"
    top = next(s for s in urls if s.startswith(("_index#", "index#")) and s.endswith("#introduction"))
    assert urls[top] == BASE + "#introduction"
    assert section_url("cli/_index#", BASE) == BASE + "cli/"
