"""The docs corpus loader: page, section and chunk ids (DESIGN §3), Markdown/MDX reading, errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docpilot.corpus.markdown import parse_page, slugify
from docpilot.corpus.pages import Corpus, load_corpus
from docpilot.errors import ConfigError, CorpusError, DocpilotError

DOCS = Path(__file__).resolve().parents[2] / "data" / "corpus" / "docs"
SHARED_DATA = Path(__file__).resolve().parents[4] / "shared" / "data"
FASTAPI_DOCS = SHARED_DATA / "fastapi-docs" / "docs" / "en" / "docs"
PREFECT_DOCS = SHARED_DATA / "prefect-docs" / "docs"


def _write(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def _page(tmp_path: Path, text: str, name: str = "page.md", **kwargs: int):
    corpus = load_corpus(_write(tmp_path / "docs", {name: text}), **kwargs)
    return corpus, next(iter(corpus.pages.values()))


def _anchors(text: str, *, mdx: bool = False) -> list[str]:
    return [section.anchor for section in parse_page(text, source="t.md", mdx=mdx).sections]


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return load_corpus(DOCS)


# --- the fixture tree -------------------------------------------------------------


def test_page_ids_follow_paths_and_index_pages_name_their_folder(corpus):
    assert sorted(corpus.pages) == [
        "guide",
        "guide/auth",
        "guide/auth/tokens",
        "index",
        "reference/cli",
        "reference/empty",
    ]
    assert corpus.pages["guide"].path == "guide/index.md"
    assert corpus.pages["index"].path == "index.md"
    assert corpus.pages["guide/auth/tokens"].path == "guide/auth/tokens.mdx"


def test_hidden_folders_are_skipped(corpus):
    assert not any("secret" in page_id or "drafts" in page_id for page_id in corpus.pages)


def test_section_ids_are_page_hash_anchor_in_document_order(corpus):
    assert [section.id for section in corpus.pages["guide/auth"].sections] == [
        "guide/auth#",
        "guide/auth#request",
        "guide/auth#sessions",
        "guide/auth#sessions-1",
    ]
    section = corpus.sections["guide/auth#request"]
    assert (section.page_id, section.anchor, section.title, section.level) == ("guide/auth", "request", "Request", 2)
    assert section.text == "Send the `Authorization` header with every request."
    assert list(corpus.sections) == [s.id for page in corpus.pages.values() for s in page.sections]


def test_front_matter_gives_title_description_and_keywords(corpus):
    auth = corpus.pages["guide/auth"]
    assert auth.title == "Authentication"
    assert auth.description == "How requests prove who they are."  # front matter beats llms.txt
    assert auth.keywords == ("login", "token")
    assert corpus.pages["guide/auth/tokens"].keywords == ("api key", "bearer")  # comma string


def test_title_falls_back_to_the_h1_then_the_file_name(corpus):
    assert corpus.pages["guide"].title == "Guide"
    assert corpus.pages["reference/cli"].title == "Command line"  # setext H1
    assert corpus.pages["reference/empty"].title == "empty"


def test_heading_path_starts_with_the_page_title(corpus):
    assert corpus.sections["guide/auth#request"].heading_path == ("Authentication", "Request")
    assert corpus.sections["guide/auth#"].heading_path == ("Authentication",)
    # The H1 that is the page title is not repeated.
    assert corpus.sections["reference/cli#options"].heading_path == ("Command line", "Options")
    assert corpus.sections["reference/cli#command-line"].heading_path == ("Command line",)


def test_empty_page_keeps_one_empty_section(corpus):
    (section,) = corpus.pages["reference/empty"].sections
    assert (section.id, section.text, section.level) == ("reference/empty#", "", 0)
    assert [c.id for c in corpus.chunks if c.page_id == "reference/empty"] == ["reference/empty#@0"]


def test_mdx_page_drops_imports_and_keeps_component_text(corpus):
    preamble = corpus.sections["guide/auth/tokens#"].text
    assert preamble == "Tokens expire after **30 days**."
    steps = corpus.sections["guide/auth/tokens#create-a-token"].text
    assert "Open settings" in steps and "Go to the settings page." in steps
    assert "<Step" not in steps and "import" not in steps
    assert "```bash\n# not a heading\nacme token create\n```" in steps


def test_vocabulary_json_is_read_with_string_values_as_lists(corpus):
    assert corpus.vocabulary == {"login": ["authentication", "sign in"], "cli": ["command line"]}


def test_llms_txt_descriptions_fill_pages_without_one(corpus):
    assert corpus.pages["guide"].description == "Start here to learn Acme."  # https://…/docs/guide/
    assert corpus.pages["guide/auth/tokens"].description == "Create and rotate API tokens."  # /docs/….html
    assert corpus.pages["reference/cli"].description == "Every command and option."  # relative link
    assert corpus.pages["index"].description is None


def test_every_chunk_carries_its_section(corpus):
    assert [c.id for c in corpus.chunks][:3] == ["guide/auth#@0", "guide/auth#request@0", "guide/auth#sessions@0"]
    for chunk in corpus.chunks:
        section = corpus.sections[chunk.section_id]
        assert chunk.id.startswith(section.id + "@")
        assert (chunk.page_id, chunk.heading_path) == (section.page_id, section.heading_path)
        assert chunk.page_title == corpus.pages[chunk.page_id].title


# --- gold entries and links -------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("guide/auth", True),
        ("guide/auth#", True),
        ("guide/auth#request", True),
        ("guide/auth/tokens#create-a-token", True),
        ("reference", True),  # no page of its own, but pages are nested under it
        ("index#", True),
        ("guide/auth#nope", False),
        ("guide/aut", False),  # a prefix must end at a '/'
        ("reference#", False),  # '#' pins one page, and there is no 'reference' page
        ("missing", False),
        ("", False),
    ],
)
def test_has_entry(corpus, entry, expected):
    assert corpus.has_entry(entry) is expected


def test_closest_suggests_existing_ids(corpus):
    assert corpus.closest("guide/auth#requst")[0] == "guide/auth#request"
    assert corpus.closest("guide/ath")[0] == "guide/auth"
    # Nothing alike: the first sections of the named page stand in.
    assert corpus.closest("guide/auth#something-else-entirely-here") == [
        "guide/auth#",
        "guide/auth#request",
        "guide/auth#sessions",
    ]
    assert len(corpus.closest("guide/auth#sessions", n=2)) == 2
    assert corpus.closest("guide/auth", n=0) == []


def test_section_url(corpus):
    base = "https://acme.dev/docs/"
    assert corpus.section_url("guide/auth#request", base) == "https://acme.dev/docs/guide/auth#request"
    assert corpus.section_url("guide/auth#", base) == "https://acme.dev/docs/guide/auth"
    assert corpus.section_url("guide#guide", "https://acme.dev/docs") == "https://acme.dev/docs/guide#guide"
    assert corpus.section_url("index#install", base) == "https://acme.dev/docs/#install"
    with pytest.raises(CorpusError, match="guide/auth#request"):
        corpus.section_url("guide/auth#requests", base)


# --- anchors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Hello World", "hello-world"),
        ("Hello, World!", "hello-world"),
        ("Foo - Bar", "foo---bar"),  # each space becomes '-', as on GitHub
        ("snake_case and kebab-case", "snake_case-and-kebab-case"),
        ("What's new in 2.0?", "whats-new-in-20"),
        ("Über uns", "über-uns"),
        ("C++ & C#", "c--c"),
    ],
)
def test_slugify_follows_github(heading, slug):
    assert slugify(heading) == slug


def test_explicit_ids_win_and_leave_the_title():
    sections = parse_page(
        "## Python Types { #types }\n## Other {#other .wide}\n## Plain {not an id}\n",
        source="t.md",
        mdx=False,
    ).sections
    assert [(s.anchor, s.title) for s in sections] == [
        ("types", "Python Types"),
        ("other", "Other"),
        ("plain-not-an-id", "Plain {not an id}"),
    ]


def test_repeated_headings_get_numbered_like_github():
    text = "## Usage\n## Usage\n## Usage-1\n## Usage\n## Intro {#usage-2}\n"
    assert _anchors(text) == ["usage", "usage-1", "usage-1-1", "usage-2", "usage-2-1"]


def test_heading_markup_is_reduced_to_text_before_slugging():
    text = (
        "## `typing` module\n"
        "### `send_message` <sup><a href=\"https://x\"><Icon icon=\"github\" /></a></sup>\n"
        "## [Links](https://x.org) and *emphasis* and __init__\n"
        "## Closing hashes ##\n"
        "## C#\n"
    )
    sections = parse_page(text, source="t.mdx", mdx=True).sections
    assert [(s.title, s.anchor) for s in sections] == [
        ("typing module", "typing-module"),
        ("send_message", "send_message"),
        ("Links and emphasis and init", "links-and-emphasis-and-init"),
        ("Closing hashes", "closing-hashes"),
        ("C#", "c"),
    ]


def test_hash_without_space_is_not_a_heading():
    assert _anchors("#hashtag\n    # indented code\n") == [""]


# --- block structure -------------------------------------------------------------


def test_setext_headings_and_thematic_breaks():
    text = "Title\n=====\n\nFirst line\nsecond line\n---\n\nbody\n\n---\n\nafter the rule\n"
    sections = parse_page(text, source="t.md", mdx=False).sections
    assert [(s.anchor, s.level) for s in sections] == [("title", 1), ("first-line-second-line", 2)]
    assert sections[1].title == "First line second line"
    assert sections[1].text == "body\n\nafter the rule"


def test_setext_underline_under_a_list_item_is_a_rule():
    assert _anchors("- item\n---\n") == [""]


@pytest.mark.parametrize("fence", ["```", "~~~", "````"])
def test_hash_lines_inside_code_fences_are_code(fence):
    text = f"## Real\n\n{fence}python\n# comment\n## not a heading\n{fence}\n\nafter\n"
    (section,) = parse_page(text, source="t.md", mdx=False).sections
    assert section.anchor == "real"
    assert section.text == f"{fence}python\n# comment\n## not a heading\n{fence}\n\nafter"


def test_unclosed_fence_runs_to_the_end():
    assert _anchors("## A\n```\n# inside\n## still inside\n") == ["a"]


def test_html_and_mdx_comments_are_dropped_even_across_lines():
    text = "keep <!-- gone --> this\n<!--\n# hidden heading\n-->\n{/* mdx\n# also hidden\n*/}\ntail\n"
    (section,) = parse_page(text, source="t.mdx", mdx=True).sections
    assert section.text == "keep  this\n\ntail"


def test_mdx_imports_exports_and_expressions_are_dropped():
    text = (
        'import { Card } from "/snippets/card.mdx"\n'
        "export const meta = {\n  a: 1,\n}\n\n"
        "Value is {props.value} here.\n\n"
        "```python\nimport os\nexport = {1}\n```\n"
    )
    (section,) = parse_page(text, source="t.mdx", mdx=True).sections
    assert section.text == "Value is  here.\n\n```python\nimport os\nexport = {1}\n```"


def test_plain_markdown_keeps_braces_and_import_lines():
    (section,) = parse_page("import this\n\nA {set} of words.\n", source="t.md", mdx=False).sections
    assert section.text == "import this\n\nA {set} of words."


def test_jsx_tags_give_way_to_their_text():
    text = (
        "<Note>\nInner text.\n</Note>\n\n"
        '<Tip title="Mind the gap">Body text.</Tip>\n\n'
        "<Frame caption=\"c\" style={{ width: 14 }}>\n  <img src=\"a.png\" />\n</Frame>\n\n"
        '<ResponseField name="--verbose"\n  type="bool">\n  Print more.\n</ResponseField>\n\n'
        "Keep `<placeholder>` and <abbr title=\"long\">ASGI</abbr> too.\n\n"
        "<style>\nh1 { display: none; }\n</style>\n"
    )
    (section,) = parse_page(text, source="t.mdx", mdx=True).sections
    assert section.text == (
        "Inner text.\n\nMind the gap\nBody text.\n\n--verbose\n  Print more.\n\n"
        "Keep `<placeholder>` and ASGI too."
    )


def test_admonitions_keep_their_title_and_body():
    text = (
        '!!! note "Read this"\n    Indented body.\n\n'
        ":::tip\nColon body.\n:::\n\n"
        "/// warning | Careful\nSlash body.\n///\n"
    )
    (section,) = parse_page(text, source="t.md", mdx=False).sections
    assert section.text == "Read this\n    Indented body.\n\nTip\nColon body.\n\nCareful\nSlash body."


def test_include_directives_stay_as_text():
    text = "{* ../../docs_src/app.py hl[3] *}\n\n--8<-- \"snippets/x.md\"\n"
    for mdx in (False, True):
        (section,) = parse_page(text, source="t", mdx=mdx).sections
        assert section.text == text.strip()


def test_links_keep_their_text():
    (section,) = parse_page('See [the guide](/guide "G") and ![a chart](c.png).\n', source="t", mdx=False).sections
    assert section.text == "See the guide and a chart."


def test_preamble_is_omitted_when_empty_but_kept_for_a_page_without_headings(tmp_path):
    assert _anchors("\n\n## A\ntext\n") == ["a"]
    assert _anchors("just text\n") == [""]
    _, page = _page(tmp_path, "---\ntitle: Only front matter\n---\n")
    assert [(s.id, s.text) for s in page.sections] == [("page#", "")]
    assert page.title == "Only front matter"


def test_crlf_and_bom_are_read(tmp_path):
    _, page = _page(tmp_path, "\ufeff---\r\ntitle: T\r\n---\r\n# H\r\nbody\r\n")
    assert page.title == "T"
    assert [(s.anchor, s.text) for s in page.sections] == [("h", "body")]


# --- front matter ----------------------------------------------------------------


def test_broken_front_matter_names_file_and_line(tmp_path):
    with pytest.raises(CorpusError) as caught:
        _page(tmp_path, "---\ntitle: Fine\ndescription: [unclosed\n---\n# H\n", name="bad.md")
    assert caught.value.path.endswith("bad.md")
    assert caught.value.line in (3, 4)
    assert "bad.md:" in str(caught.value) and "fix:" in str(caught.value)


@pytest.mark.parametrize(
    ("front", "message"),
    [
        ("---\ntitle: x\n", "never closed"),
        ("---\n- a\n- b\n---\n", "mapping"),
        ("---\ntitle: [a, b]\n---\n", "'title' must be text"),
        ("---\nkeywords: {a: 1}\n---\n", "keywords"),
    ],
)
def test_front_matter_shape_errors(tmp_path, front, message):
    with pytest.raises(CorpusError, match=message):
        _page(tmp_path, front + "body\n")


# --- chunking --------------------------------------------------------------------


def test_long_section_splits_on_paragraphs_within_the_word_limit(tmp_path):
    paragraphs = [" ".join(f"p{i}w{j}" for j in range(15)) + "." for i in range(10)]
    corpus, _ = _page(tmp_path, "## Long\n\n" + "\n\n".join(paragraphs) + "\n", chunk_words=40)
    chunks = corpus.chunks
    assert [c.id for c in chunks] == [f"page#long@{n}" for n in range(5)]
    assert all(len(c.text.split()) <= 40 for c in chunks)
    assert chunks[0].text == paragraphs[0] + "\n\n" + paragraphs[1]  # whole paragraphs, 30 words
    assert " ".join(c.text for c in chunks).split() == " ".join(paragraphs).split()


def test_long_paragraph_splits_at_sentences_then_words(tmp_path):
    sentences = [" ".join(["word"] * 8) + "." for _ in range(6)]
    run_on = " ".join(["x"] * 25)
    corpus, _ = _page(tmp_path, " ".join(sentences) + "\n\n" + run_on + "\n", chunk_words=20)
    texts = [c.text for c in corpus.chunks]
    assert texts[:3] == [" ".join(sentences[0:2])] * 3
    assert texts[3:] == [" ".join(["x"] * 20), " ".join(["x"] * 5)]
    assert all(c.section_id == "page#" for c in corpus.chunks)


def test_long_code_fence_splits_at_lines(tmp_path):
    code = "```\n" + "\n".join(f"line {i} a b c" for i in range(20)) + "\n```"
    corpus, _ = _page(tmp_path, code + "\n", chunk_words=30)
    assert all(len(c.text.split()) <= 30 for c in corpus.chunks)
    assert "\n".join(c.text for c in corpus.chunks).split("\n") == code.split("\n")


def test_chunk_words_must_be_positive(tmp_path):
    with pytest.raises(ConfigError, match="chunk_words"):
        load_corpus(DOCS, chunk_words=0)


# --- files -----------------------------------------------------------------------


def test_nested_folders_and_sorted_deterministic_order(tmp_path):
    root = _write(tmp_path / "docs", {"b.md": "# B\n", "a/z/deep.mdx": "# Deep\n", "a/b.md": "# AB\n"})
    first, second = load_corpus(root), load_corpus(root)
    assert list(first.pages) == ["a/b", "a/z/deep", "b"]
    assert first.fingerprint == second.fingerprint
    assert first.has_entry("a") and first.has_entry("a/z") and first.has_entry("a/z/deep#deep")


def test_fingerprint_follows_every_byte_of_pages_vocabulary_and_llms(tmp_path):
    root = _write(tmp_path / "docs", {"a.md": "# A\n"})
    seen = {load_corpus(root).fingerprint}
    (root / "a.md").write_text("# A\n\n", encoding="utf-8")
    seen.add(load_corpus(root).fingerprint)
    (root / "vocabulary.json").write_text("{}", encoding="utf-8")
    seen.add(load_corpus(root).fingerprint)
    (root / "llms.txt").write_text("# A\n", encoding="utf-8")
    seen.add(load_corpus(root).fingerprint)
    (root / "notes.txt").write_text("not part of the corpus", encoding="utf-8")
    seen.add(load_corpus(root).fingerprint)
    assert len(seen) == 4


def test_two_files_with_one_page_id_are_refused(tmp_path):
    root = _write(tmp_path / "docs", {"guide.md": "# A\n", "guide/index.md": "# B\n"})
    with pytest.raises(CorpusError, match="guide.md and guide/index.md"):
        load_corpus(root)


def test_non_utf8_page_names_the_file_and_byte_offset(tmp_path):
    root = _write(tmp_path / "docs", {"ok.md": "# Fine\n", "sub/latin.md": b"# Caf" + b"\xe9\nline two\n"})
    with pytest.raises(CorpusError) as caught:
        load_corpus(root)
    message = str(caught.value)
    assert caught.value.path.endswith("sub/latin.md") and caught.value.line == 1
    assert "offset 5" in message and "0xe9" in message and "UTF-8" in message and "fix:" in message


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "no .md or .mdx pages"),
        ({"readme.txt": "text", ".hidden/page.md": "# hidden"}, "no .md or .mdx pages"),
    ],
)
def test_folder_without_pages_is_refused(tmp_path, files, message):
    root = tmp_path / "docs"
    root.mkdir()
    _write(root, files)
    with pytest.raises(CorpusError, match=message) as caught:
        load_corpus(root)
    assert "fix:" in str(caught.value)


def test_missing_root_and_file_root_are_refused(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nowhere")
    (tmp_path / "file.md").write_text("# A\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="not a folder"):
        load_corpus(tmp_path / "file.md")


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links here")
@pytest.mark.parametrize("kind", ["file", "folder", "vocabulary"])
def test_symlink_leading_outside_the_root_is_refused(tmp_path, kind):
    outside = _write(tmp_path / "outside", {"secret.md": "# Secret\n", "vocabulary.json": "{}"})
    root = _write(tmp_path / "docs", {"index.md": "# Home\n"})
    link = {"file": "leak.md", "folder": "leaked", "vocabulary": "vocabulary.json"}[kind]
    target = {"file": outside / "secret.md", "folder": outside, "vocabulary": outside / "vocabulary.json"}[kind]
    (root / link).symlink_to(target)
    with pytest.raises(CorpusError, match="outside the docs folder") as caught:
        load_corpus(root)
    assert caught.value.path.endswith(link)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links here")
def test_symlinks_inside_the_root_are_followed_without_looping(tmp_path):
    root = _write(tmp_path / "docs", {"real/page.md": "# Page\n"})
    (root / "alias.md").symlink_to(root / "real" / "page.md")
    (root / "real" / "loop").symlink_to(root)  # would recurse forever if followed
    (root / "mirror").symlink_to(root / "real")
    # Regression: each link was a page of its own, so links to links multiplied one file.
    assert list(load_corpus(root).pages) == ["real/page"]  # one file, one page, under its own path


def test_a_link_to_a_page_outside_the_real_tree_keeps_the_link_name(tmp_path):
    root = _write(tmp_path / "docs", {"hidden/.drafts/page.md": "# Draft\n"})
    (root / "draft.md").symlink_to(root / "hidden" / ".drafts" / "page.md")
    assert list(load_corpus(root).pages) == ["draft"]


def test_symlink_fan_out_reads_each_file_once(tmp_path):
    root = _write(tmp_path / "docs", {"l0/page.md": "# Page\n"})
    for level in range(1, 17):  # each level links twice to the one below: 2**16 paths to one file
        (root / f"l{level}").mkdir()
        (root / f"l{level}" / "a").symlink_to(root / f"l{level - 1}")
        (root / f"l{level}" / "b").symlink_to(root / f"l{level - 1}")
    assert list(load_corpus(root).pages) == ["l0/page"]


# Regression: a hard link to /etc/passwd inside the docs folder was indexed as a page.
def test_a_hard_link_to_a_file_outside_is_refused(tmp_path):
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\n")
    root = _write(tmp_path / "docs", {"index.md": "# Home\n"})
    os.link(outside, root / "passwd.md")
    with pytest.raises(CorpusError, match="hard link") as caught:
        load_corpus(root)
    assert caught.value.path.endswith("passwd.md")


def test_hard_links_inside_the_folder_are_one_page(tmp_path):
    root = _write(tmp_path / "docs", {"a.md": "# A\n"})
    os.link(root / "a.md", root / "b.md")
    assert list(load_corpus(root).pages) == ["a"]


def test_a_folder_past_the_page_budget_is_refused(tmp_path, monkeypatch):
    from docpilot.corpus import discovery

    monkeypatch.setattr(discovery, "MAX_PAGES", 3)
    root = _write(tmp_path / "docs", {f"p{i}.md": "# P\n" for i in range(5)})
    with pytest.raises(CorpusError, match="more than 3 pages"):
        load_corpus(root)


# --- vocabulary.json and llms.txt ------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('{\n  "a": ["b"],\n  "c": ["d"\n}\n', 4, "not valid JSON"),
        ('["a", "b"]', 1, "JSON object"),
        ('{\n  "ok": "fine",\n  "bad": [1, 2]\n}', 3, "'bad'"),
        ('{"bad": {"x": 1}}', 1, "string or a list of strings"),
    ],
)
def test_bad_vocabulary_names_file_and_line(tmp_path, text, line, message):
    root = _write(tmp_path / "docs", {"a.md": "# A\n", "vocabulary.json": text})
    with pytest.raises(CorpusError, match=message) as caught:
        load_corpus(root)
    assert caught.value.path.endswith("vocabulary.json")
    assert caught.value.line == line


def test_llms_txt_links_map_to_page_ids(tmp_path):
    llms = (
        "# Site\n\n> Summary.\n\n## Docs\n\n"
        "- [Home](https://x.dev/): The home page.\n"
        "- [A](https://x.dev/docs/guide/a.md): About A.\n"
        "- [B](/guide/b/): About B.\n"
        "- [B again](/guide/b): Second listing is ignored.\n"
        "- [No description](/guide/c)\n"
        "- [Unknown](/nowhere): Not a page.\n"
        "not a list item: [A](/guide/a): ignored\n"
    )
    root = _write(
        tmp_path / "docs",
        {
            "index.md": "# Home\n",
            "guide/a.md": "# A\n",
            "guide/b/index.mdx": "# B\n",
            "guide/c.md": "# C\n",
            "llms.txt": llms,
        },
    )
    pages = load_corpus(root).pages
    assert {page_id: page.description for page_id, page in pages.items()} == {
        "guide/a": "About A.",
        "guide/b": "About B.",
        "guide/c": None,
        "index": "The home page.",
    }


# --- real corpora ----------------------------------------------------------------


@pytest.fixture(scope="module")
def fastapi() -> Corpus:
    if not FASTAPI_DOCS.is_dir():
        pytest.skip(f"{FASTAPI_DOCS} is absent")
    return load_corpus(FASTAPI_DOCS)


@pytest.fixture(scope="module")
def prefect() -> Corpus:
    if not PREFECT_DOCS.is_dir():
        pytest.skip(f"{PREFECT_DOCS} is absent")
    return load_corpus(PREFECT_DOCS)


def test_fastapi_docs(fastapi):
    assert len(fastapi.pages) == 155
    assert fastapi.pages["tutorial/first-steps"].title == "First Steps"
    assert fastapi.pages["tutorial/security"].path == "tutorial/security/index.md"
    for section_id in (
        "python-types#python-types-intro",
        "python-types#typing-module",
        "tutorial/first-steps#interactive-api-docs",
        "tutorial/request-files#import-file",
        "tutorial/header-params#import-header",
    ):
        assert section_id in fastapi.sections, fastapi.closest(section_id)
    assert fastapi.has_entry("tutorial/security")  # an index page with pages nested under it
    assert fastapi.has_entry("tutorial/security/oauth2-jwt")


def test_prefect_docs(prefect):
    assert len(prefect.pages) == 955
    page = prefect.pages["v3/how-to-guides/workflows/write-and-run"]
    assert page.title == "How to write and run a workflow"
    assert "@flow" in page.keywords
    assert [s.anchor for s in page.sections][:3] == [
        "define-a-workflow",
        "create-tasks-and-child-workflows",
        "cancel-a-workflow-if-it-runs-for-too-long",
    ]
    cli = prefect.pages["v3/api-ref/cli/api"]
    assert cli.title == "prefect api"  # front matter title is blank, so the H1 names it
    # A <ResponseField name="--data"> keeps its name above its text.
    cli_text = prefect.sections["v3/api-ref/cli/api#prefect-api"].text
    assert "--data\n    Request body as JSON string or @filename" in cli_text
    assert "integrations/prefect-slack/api-ref/prefect_slack-messages#send_chat_message" in prefect.sections
    assert prefect.has_entry("integrations/prefect-slack")
    for chunk in prefect.chunks:
        assert len(chunk.text.split()) <= 220
        assert "{/*" not in chunk.text or "```" in chunk.text


# --- robustness ------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    page=st.binary(max_size=400) | st.text(alphabet="#`~-=*_<>{}/!:[]()\\\"'\n \tabc", max_size=300).map(str.encode),
    suffix=st.sampled_from([".md", ".mdx"]),
    vocabulary=st.none() | st.text(max_size=80) | st.just('{"a": ["b"], "c": "d"}'),
    front=st.none() | st.text(max_size=80),
)
def test_any_input_raises_only_docpilot_errors(tmp_path_factory, page, suffix, vocabulary, front):
    root = tmp_path_factory.mktemp("docs")
    body = (b"---\n" + front.encode() + b"\n---\n" + page) if front is not None else page
    (root / f"page{suffix}").write_bytes(body)
    if vocabulary is not None:
        (root / "vocabulary.json").write_text(vocabulary, encoding="utf-8")
    try:
        corpus = load_corpus(root, chunk_words=5)
    except DocpilotError:
        return
    section_ids = set(corpus.sections)
    assert section_ids and all(chunk.section_id in section_ids for chunk in corpus.chunks)
    assert all(len(chunk.text.split()) <= 5 for chunk in corpus.chunks)
    assert all(corpus.has_entry(section_id) for section_id in section_ids)
    json.dumps(corpus.vocabulary)
