"""Static-site generators' syntax: each generator's pages read as the text their site shows.

Every docs folder here is written as a writer of that generator writes one (Hugo,
Jekyll and GitBook Liquid, MyST, mkdocs-macros Jinja, VitePress and Docusaurus
containers); the tests read them through ``load_corpus`` as ``index`` and ``eval`` do.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docpilot.corpus.markdown import parse_page
from docpilot.corpus.pages import load_corpus

TEMPLATE = re.compile(r"\{\{|\{%")
OPENER = re.compile(r"^[ \t]*(`{3,}|~{3,})")

HUGO = {
    "_index.md": """\
---
title: Poetry
---
Poetry manages dependencies. Start with {{< relref "managing-environments" >}}.
""",
    "configuration.md": """\
---
title: Configuration
---
## virtualenvs.in-project

Create the virtualenv inside the project's root directory.
""",
    "managing-environments.md": """\
---
title: Managing environments
---
{{% note %}}
Unlike with other packages, Poetry does not create the virtualenv in the project
unless [virtualenvs.in-project]({{< relref "configuration#virtualenvsin-project" >}}) is set.
{{% /note %}}

## Deleting the environments

If you want to remove every environment at once, you can simply use the command as shown below:

```bash
poetry env remove --all
```

{{< figure src="/images/envs.png" caption="Where the environments live" >}}
{{< youtube w7Ft2ymGmfc >}}

{{< tabs >}}
{{< tab "Linux" >}}
The cache folder is under `~/.cache/pypoetry`.
{{< /tab >}}
{{< tab name="macOS" >}}
The cache folder is under `~/Library/Caches/pypoetry`.
{{< /tab >}}
{{< /tabs >}}

{{< highlight toml >}}
[tool.poetry]
name = "{{ not a template }}"
{{< /highlight >}}
""",
}

LIQUID = {
    "index.md": """\
---
title: Handbook
---
# {{ page.title }}

{% hint style="info" %}
Every deploy runs the checks first. See [the deploy guide]({% link guide/deploy.md %}).
{% endhint %}

{% include footer.html %}
{% tabs %}
{% tab title="CLI" %}
Type the deploy command in a terminal.
{% endtab %}
{% endtabs %}
""",
    "guide/deploy.md": """\
# Deploy

## Rollback

{% if site.beta %}
Roll back with one command.
{% endif %}

{% raw %}
Write {{ secrets.TOKEN }} in the workflow.
{% endraw %}

Inline {% raw %}{{ env }}{% endraw %} stays as code. {% comment %}A note to writers.{% endcomment %}

```yaml
token: {{ secrets.TOKEN }}  # kept: this is code
```
""",
}

MYST = {
    "index.md": """\
# Project docs

Read {doc}`install` first, then {ref}`the cache settings <cache-settings>`.

```{toctree}
:maxdepth: 2
install
```
""",
    "install.md": """\
# Installing

```{note}
:class: dropdown
The wheel needs Python 3.11 or newer.
```

:::{admonition} Behind a proxy
:class: tip
Set HTTPS_PROXY before you install. The {ref}`cache-settings` apply there too.
:::

(cache-settings)=
## Cache settings

The cache lives in {code}`~/.cache/project` and {py:func}`project.clear` empties it.

````{tip}
Pin the version:

```{code-block} bash
:caption: Pinning
pip install project==2.1
```
````

```{include} ../README.md
```
""",
}

JINJA = {
    "index.md": """\
# Release {{ version }}

{# This page is built by mkdocs-macros. #}
{% if config.extra.beta %}
The beta channel ships every week.
{% else %}
The stable channel ships every month.
{% endif %}

Download {{ download_link(version) }} from the releases page.
{% set channel = "stable" %}
""",
}

CONTAINERS = {
    "guide.md": """\
# Guide

::: tip Before you start
Install the CLI first.
:::

::: warning
Tokens expire after a day.
:::

:::note[Heads up]
The API is in beta.
:::
""",
}


def _folder(tmp_path, files: dict[str, str]):
    docs = tmp_path / "docs"
    for name, text in files.items():
        path = docs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return load_corpus(docs)


def _texts(corpus) -> dict[str, str]:
    return {section.id: section.text for section in corpus.sections.values()}


def _outside_code(text: str) -> str:
    """The text without its code: fences (one left open runs to the end, as the parser reads it) and spans."""
    kept, fence = [], None
    for line in text.split("\n"):
        stripped = line.strip()
        if fence is None:
            opened = OPENER.match(line)
            if opened:
                fence = opened.group(1)
            else:
                kept.append(line)
        elif len(stripped) >= len(fence) and stripped == fence[0] * len(stripped):
            fence = None
    # Code spans within a line: template syntax in a span across lines is not read as code.
    return re.sub(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", "", "\n".join(kept))


def test_hugo_shortcodes_leave_their_text_and_code(tmp_path):
    corpus = _folder(tmp_path, HUGO)
    texts = _texts(corpus)
    assert texts["managing-environments#"] == (
        "Unlike with other packages, Poetry does not create the virtualenv in the project\n"
        "unless virtualenvs.in-project is set."
    )
    assert texts["managing-environments#deleting-the-environments"] == (
        "If you want to remove every environment at once, you can simply use the command as shown below:\n\n"
        "```bash\npoetry env remove --all\n```\n\n"
        "Where the environments live\n\n"
        "Linux\nThe cache folder is under `~/.cache/pypoetry`.\n\n"
        "macOS\nThe cache folder is under `~/Library/Caches/pypoetry`.\n\n"
        '```toml\n[tool.poetry]\nname = "{{ not a template }}"\n```'
    )
    # A single shortcode with nothing to show (a video) is dropped and counted; a figure keeps its caption.
    assert corpus.pages["managing-environments"].dropped == {"Hugo shortcode": 1}
    assert corpus.pages["configuration"].dropped == {}


def test_a_relref_links_the_section_to_the_page_or_section_it_names(tmp_path):
    corpus = _folder(tmp_path, HUGO)
    note = corpus.sections["managing-environments#"]
    assert note.links == ("configuration#virtualenvsin-project",)
    assert note.links[0] in corpus.sections
    # Outside a Markdown link, the reference reads as the title of what it names.
    start = corpus.sections["_index#"]
    assert start.text == "Poetry manages dependencies. Start with Managing environments."
    assert start.links == ("managing-environments",)


def test_liquid_tags_of_jekyll_and_gitbook(tmp_path):
    corpus = _folder(tmp_path, LIQUID)
    texts = _texts(corpus)
    # {{ page.title }} shows the front matter's title; the hint and the tabs give way to their bodies.
    assert corpus.sections["index#handbook"].title == "Handbook"
    assert texts["index#handbook"] == (
        "Every deploy runs the checks first. See the deploy guide.\n\nCLI\nType the deploy command in a terminal."
    )
    assert corpus.sections["index#handbook"].links == ("guide/deploy",)
    assert texts["guide/deploy#rollback"] == (
        "Roll back with one command.\n\n"
        "~~~~~~\nWrite {{ secrets.TOKEN }} in the workflow.\n~~~~~~\n\n"
        "Inline `{{ env }}` stays as code.\n\n"
        "```yaml\ntoken: {{ secrets.TOKEN }}  # kept: this is code\n```"
    )
    assert corpus.pages["index"].dropped == {"include": 1}
    assert corpus.pages["guide/deploy"].dropped == {}


def test_myst_directives_and_roles(tmp_path):
    corpus = _folder(tmp_path, MYST)
    texts = _texts(corpus)
    # {doc} reads as the page's title, {ref} with text as its text; both link to what they name.
    assert texts["index#project-docs"] == "Read Installing first, then the cache settings."
    assert corpus.sections["index#project-docs"].links == ("install", "install#cache-settings")
    assert texts["install#installing"] == (
        "The wheel needs Python 3.11 or newer.\n\n"
        "Behind a proxy\nSet HTTPS_PROXY before you install. The Cache settings apply there too."
    )
    assert corpus.sections["install#installing"].links == ("install#cache-settings",)
    assert texts["install#cache-settings"] == (
        "The cache lives in `~/.cache/project` and `project.clear` empties it.\n\n"
        "Pin the version:\n\n```bash\npip install project==2.1\n```"
    )
    assert corpus.pages["index"].dropped == {"MyST directive": 1}
    assert corpus.pages["install"].dropped == {"include": 1}


def test_mkdocs_macros_jinja(tmp_path):
    corpus = _folder(tmp_path, JINJA)
    [section] = corpus.sections.values()
    assert section.title == "Release"
    # Both branches stay (which one the site shows is unknown); a macro's output cannot be known.
    assert section.text == (
        "The beta channel ships every week.\n\nThe stable channel ships every month.\n\n"
        "Download  from the releases page."
    )
    assert corpus.pages["index"].dropped == {"template expression": 2, "template tag": 1}


def test_vitepress_and_docusaurus_containers(tmp_path):
    [section] = _folder(tmp_path, CONTAINERS).sections.values()
    assert section.text == (
        "Before you start\nInstall the CLI first.\n\nWarning\nTokens expire after a day.\n\n"
        "Heads up\nThe API is in beta."
    )


def test_a_cross_reference_to_no_page_is_counted_and_links_nowhere(tmp_path):
    corpus = _folder(tmp_path, {"a.md": "# A\n\nSee {{< ref \"missing\" >}} and {doc}`gone`.\n"})
    section = corpus.sections["a#a"]
    assert section.text == "See missing and gone." and section.links == ()
    assert corpus.pages["a"].dropped == {"unresolved cross-reference": 2}


def test_a_shortcode_over_several_lines_is_read_whole(tmp_path):
    page = '# A\n\n{{< figure\n    src="a.png"\n    caption="The flow"\n>}}\n\nAfter.\n\n{{< broken\n\nText.\n'
    [section] = parse_page(page, source="a.md", mdx=False).sections
    # An opener whose closer never comes before a blank line goes, with the rest of its line.
    assert section.text == "The flow\n\nAfter.\n\nText."


def test_mdx_pages_keep_their_braces_for_the_mdx_rules():
    page = '<Frame caption="c" style={{color: "red"}}>Inner</Frame>\n\nSee {ref}`x`.\n'
    [section] = parse_page(page, source="a.mdx", mdx=True).sections
    assert section.text == "Inner\n\nSee x."


def test_template_syntax_in_code_is_code():
    page = (
        "# A\n\nShortcodes are written `{{< note >}}` in a page:\n\n"
        "~~~markdown\n{{% note %}}\n{% hint %}\n```{note}\n~~~\n"
    )
    [section] = parse_page(page, source="a.md", mdx=False).sections
    assert section.text == page.split("\n\n", 1)[1].rstrip("\n")


_CONSTRUCTS = [
    "{{% note %}}", "{{% /note %}}", "{{< tabs >}}", "{{< /tabs >}}", '{{< tab "Linux" >}}', "{{< /tab >}}",
    '{{< figure src="x.png" >}}', '{{< relref "a#b" >}}', "{{< ref a >}}", '[t]({{< relref "a" >}})',
    '{% hint style="info" %}', "{% endhint %}", "{% include x.md %}", "{% raw %}", "{% endraw %}",
    "{{ page.title }}", "{{ version }}", "{% if x %}", "{% else %}", "{% endif %}", "{# c #}", "{#", "#}",
    "{% link a.md %}", "```{note}", ":::{tip}", ":::", "```", ":class: x", "(lab)=", "{ref}`a <b>`",
    "{doc}`a`", "::: tip T", ":::note[T]", "{{", "{%", "}}", "%}", ">}}", "{{<", "{{%", "{{-", "-}}",
]
_PROSE = ["word", "Run it", ".", " ", "\n", "\n\n", "## Head", "# Top", "`", "[", "]", "(", ")", '"', "-"]


@settings(max_examples=300, deadline=None, database=None)
@given(pieces=st.lists(st.sampled_from(_CONSTRUCTS + _PROSE), max_size=40))
@pytest.mark.slow
def test_no_template_braces_reach_a_section_outside_code(tmp_path_factory, pieces):
    text = "Intro.\n" + "".join(pieces)  # a page that starts with '---' opens front matter
    for section in parse_page(text, source="p.md", mdx=False, page_id="p").sections:
        assert not TEMPLATE.search(_outside_code(section.text)), section.text
        # A heading's code span loses its backticks in the title and stays code; so does a raw block, which a
        # page shows as code (below).
        if "`" not in text and "{% raw %}" not in text:
            assert not TEMPLATE.search(section.title), section.title


def test_a_raw_block_in_a_heading_shows_its_text_in_the_title_as_code():
    [section] = parse_page("## Head{% raw %}{{% note %}}{% endraw %}\n\nText.\n", source="p.md", mdx=False,
                           page_id="p").sections
    assert section.title == "Head{{% note %}}" and section.text == "Text."


# Regression: a raw block written against a fence opener ran its code span's closing tick into the fence's
# backticks, and the template braces inside were read as text.
def test_a_raw_block_next_to_backticks_stays_code():
    text = "Intro.\n{% raw %}{{% note %}}{% endraw %}```{note}"
    for section in parse_page(text, source="p.md", mdx=False, page_id="p").sections:
        assert not TEMPLATE.search(_outside_code(section.text)), section.text
