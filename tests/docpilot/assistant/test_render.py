"""The answer panel: markers to links, hallucinated markers removed, unlinked answers visible."""

from __future__ import annotations

from docpilot.assistant.render import render_panel
from docpilot.models.base import Source

SOURCES = [
    Source(n=1, section_id="guide/auth#tokens", title="Auth › Tokens", text="..."),
    Source(n=2, section_id="guide/deploy#rollback", title="Deploy › Rollback", text="..."),
]


def url(section_id: str) -> str:
    page, _, anchor = section_id.partition("#")
    return f"https://docs.example/{page}" + (f"#{anchor}" if anchor else "")


def test_markers_become_links_and_sources_list_the_cited():
    panel = render_panel("Export ACME_TOKEN [1]. Roll back with acme rollback [2].", SOURCES, url)
    assert panel.citations == ["guide/auth#tokens", "guide/deploy#rollback"]
    assert panel.links == 2 and panel.hallucinated == []
    assert "[[1]](https://docs.example/guide/auth#tokens)" in panel.markdown
    assert [s.section_id for s in panel.sources] == panel.citations
    assert '<a class="cite" href="https://docs.example/guide/deploy#rollback">[2]</a>' in panel.html


def test_a_marker_naming_no_primed_source_is_removed_and_counted():
    panel = render_panel("Rotate tokens [7] every ninety days [1].", SOURCES, url)
    assert panel.hallucinated == ["7"]
    assert "[7]" not in panel.markdown and "[7]" not in panel.html
    assert panel.citations == ["guide/auth#tokens"]


def test_grouped_markers_resolve_each_number():
    panel = render_panel("Both apply [1, 2].", SOURCES, url)
    assert panel.markers == ["1", "2"] and panel.links == 2


def test_a_section_id_in_brackets_is_not_a_link():
    panel = render_panel("See [guide/auth#tokens] for details.", SOURCES, url)
    assert panel.markers == ["guide/auth#tokens"]
    assert panel.links == 0 and panel.citations == []
    # Nothing was cited, so the primed sources are shown: an unlinked answer.
    assert [s.section_id for s in panel.sources] == ["guide/auth#tokens", "guide/deploy#rollback"]


def test_markdown_links_and_plain_brackets_are_not_markers():
    panel = render_panel("Use [the CLI](https://x) with an [optional] flag [2].", SOURCES, url)
    assert panel.markers == ["2"]
    assert "[the CLI](https://x)" in panel.markdown


def test_html_escapes_everything_from_the_model():
    panel = render_panel('<script>alert(1)</script><img src=x onerror="alert(2)"> [1]', SOURCES, url)
    assert "<script>" not in panel.html and "<img" not in panel.html
    assert "&lt;script&gt;" in panel.html


def test_a_refusal_shows_no_sources():
    panel = render_panel("REFUSE: not-answerable", SOURCES, url, refused=True)
    assert panel.sources == [] and panel.links == 0 and "does not answer" in panel.markdown


def test_code_spans_show_as_code_and_stay_escaped():
    # Regression: answers showed raw backticks around commands instead of inline code.
    panel = render_panel("Run `acme rollback` [2], not `<script>` or a lone ` tick.", SOURCES, url)
    assert "Run <code>acme rollback</code> <a class=\"cite\"" in panel.html
    assert "<code>&lt;script&gt;</code>" in panel.html and "a lone ` tick" in panel.html
    assert "`acme rollback`" in panel.markdown  # the Markdown form keeps Markdown's own syntax
def test_a_section_id_that_was_never_primed_is_a_hallucinated_citation():
    # Regression: only numbers out of range were counted; an invented section id passed as a plain marker.
    panel = render_panel("See [guide/billing#refunds] and [guide/auth#tokens] [1].", SOURCES, url)
    assert panel.markers == ["guide/billing#refunds", "guide/auth#tokens", "1"]
    assert panel.hallucinated == ["guide/billing#refunds"]
    assert "guide/billing#refunds" not in panel.markdown and "guide/billing#refunds" not in panel.html
    assert "[guide/auth#tokens]" in panel.markdown  # primed: kept as text, not a link
    assert panel.citations == ["guide/auth#tokens"] and panel.links == 1


def test_a_code_block_shows_as_code_and_its_brackets_are_no_markers():
    answer = (
        "Keep the last three releases in the list as shown below: [2]\n\n"
        "```bash\nacme releases --keep 3 | awk '{print $1[0]}' ;\necho ${ids[9]}\n```"
    )
    panel = render_panel(answer, SOURCES, url)
    assert panel.markers == ["2"] and panel.hallucinated == []
    assert panel.html.startswith('<div class="panel"><p>Keep the last three releases in the list as shown below: <a ')
    assert "<pre><code class=\"language-bash\">acme releases --keep 3 | awk &#x27;{print $1[0]}&#x27; ;\n" \
           "echo ${ids[9]}</code></pre>" in panel.html
    # The space a removed marker leaves before punctuation goes in prose, never in code.
    assert "awk '{print $1[0]}' ;\necho ${ids[9]}\n```" in panel.markdown
